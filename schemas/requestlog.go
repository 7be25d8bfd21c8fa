package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

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
// /mcp. Bodies are already redacted and capped at ingest; see Body for how
// they are written.
type RequestLog struct {
	At           time.Time `json:"at"`
	Method       string    `json:"method"`
	Path         string    `json:"path"`
	Status       int       `json:"status"`
	DurationUS   int64     `json:"durationUs"`
	KeyID        string    `json:"keyId"`
	KeyKind      string    `json:"keyKind"`
	AppID        string    `json:"appId,omitempty"`    // OAuth access tokens: the app
	MemberID     string    `json:"memberId,omitempty"` // OAuth access tokens: the member it acts as
	RequestBody  Body      `json:"requestBody,omitempty"`
	ResponseBody Body      `json:"responseBody,omitempty"`
	Truncated    bool      `json:"truncated,omitempty"`
	Produced     Produced  `json:"produced"`
	IP           string    `json:"ip,omitempty"`
	UserAgent    string    `json:"userAgent,omitempty"`
}

// Body is the text of a request or response body in the request log. In
// JSON it is the body itself when the text is a JSON object or array
// without whitespace outside its strings, and otherwise a JSON string
// holding the text (a body that is not JSON, is indented, or was cut at the
// cap). A consumer thus reads JSON bodies as JSON, ingest copies them
// instead of escaping them, and AppendBody's output reads back as the exact
// text. (json.Marshal escapes <, >, & and U+2028/U+2029 in what
// MarshalJSON returns, so through encoding/json a JSON body reads back as
// an equal JSON value with those characters escaped.)
type Body string

// MarshalJSON writes b as AppendBody does.
func (b Body) MarshalJSON() ([]byte, error) { return AppendBody(nil, string(b)), nil }

// UnmarshalJSON reads either form; null leaves b unchanged.
func (b *Body) UnmarshalJSON(data []byte) error {
	if len(data) == 0 {
		return errors.New("request log body: empty JSON value")
	}
	switch data[0] {
	case '{', '[':
		*b = Body(data)
		return nil
	case 'n':
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("request log body: %w", err)
	}
	*b = Body(s)
	return nil
}

// AppendBody appends text as a Body's JSON: the text itself when it is a
// compact JSON object or array, else a JSON string.
func AppendBody(dst []byte, text string) []byte {
	return appendBody(dst, text, false)
}

// AppendCompactBody is AppendBody for a text its caller knows to be compact
// JSON (an encoder's output, redacted but not cut): an object or array is
// copied without AppendBody's validation pass.
func AppendCompactBody(dst []byte, text string) []byte {
	return appendBody(dst, text, true)
}

func appendBody(dst []byte, text string, compact bool) []byte {
	if len(text) > 0 && (text[0] == '{' || text[0] == '[') {
		if compact {
			return append(dst, text...)
		}
		if _, compact := wholeValue(unsafe.Slice(unsafe.StringData(text), len(text))); compact {
			return append(dst, text...)
		}
	}
	return AppendJSONString(dst, text)
}
