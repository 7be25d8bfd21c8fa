package schemas

import "time"

// TypeRequestLogged is the envelope type of a request-log record.
const TypeRequestLogged = "request.logged.v1"

// Produced names what one API call produced, for the request log.
type Produced struct {
	MessageIDs    []string `json:"messageIds,omitempty"`
	EventIDs      []string `json:"eventIds,omitempty"`
	JourneyRunIDs []string `json:"journeyRunIds,omitempty"`
	ContactIDs    []string `json:"contactIds,omitempty"`
	Recipient     string   `json:"recipient,omitempty"`
	ExternalID    string   `json:"externalId,omitempty"`
}

// RequestLog is the payload of a request.logged.v1 envelope: one
// authenticated call to /v1/*, /public/events, /public/journeys/trigger or
// /mcp. Bodies are already redacted and capped at ingest.
type RequestLog struct {
	At           time.Time `json:"at"`
	Method       string    `json:"method"`
	Path         string    `json:"path"`
	Status       int       `json:"status"`
	DurationUS   int64     `json:"durationUs"`
	KeyID        string    `json:"keyId"`
	KeyKind      string    `json:"keyKind"`
	RequestBody  string    `json:"requestBody,omitempty"`
	ResponseBody string    `json:"responseBody,omitempty"`
	Truncated    bool      `json:"truncated,omitempty"`
	Produced     Produced  `json:"produced"`
	IP           string    `json:"ip,omitempty"`
	UserAgent    string    `json:"userAgent,omitempty"`
}
