package clickhouse

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

//go:embed sql/requestlog_query.sql
var requestLogSQL string

// Request-log page sizes for QueryRequests.
const (
	DefaultRequestsLimit = 50
	MaxRequestsLimit     = 1000
)

// RequestRow is one request-log entry as `sendstream admin requests` prints it.
type RequestRow struct {
	ID            string    `json:"id"`
	At            time.Time `json:"at"`
	Method        string    `json:"method"`
	Path          string    `json:"path"`
	Status        int       `json:"status"`
	DurationMs    float64   `json:"durationMs"`
	KeyID         string    `json:"keyId"`
	KeyKind       string    `json:"keyKind"`
	RequestBody   string    `json:"requestBody"`
	ResponseBody  string    `json:"responseBody"`
	Truncated     bool      `json:"truncated"`
	MessageIDs    []string  `json:"messageIds"`
	EventIDs      []string  `json:"eventIds"`
	JourneyRunIDs []string  `json:"journeyRunIds"`
	ContactIDs    []string  `json:"contactIds"`
	Recipient     string    `json:"recipient"`
	ExternalID    string    `json:"externalId"`
	IP            string    `json:"ip"`
	UserAgent     string    `json:"userAgent"`
}

// QueryRequests returns the request log of workspace at or after since (the
// zero time means from the start), newest first, at most limit rows, each id
// once even before ClickHouse has merged redelivered duplicates. limit 0
// means DefaultRequestsLimit; a negative limit or one above MaxRequestsLimit
// is an error. Times are UTC with second precision; the result is never nil.
func QueryRequests(ctx context.Context, conn driver.Conn, workspace string, since time.Time, limit int) ([]RequestRow, error) {
	if workspace == "" {
		return nil, errors.New("query request log: empty workspace")
	}
	if limit == 0 {
		limit = DefaultRequestsLimit
	}
	if limit < 0 || limit > MaxRequestsLimit {
		return nil, fmt.Errorf("query request log: limit %d: must be 1 to %d", limit, MaxRequestsLimit)
	}
	var from int64
	if !since.IsZero() && since.Unix() > 0 {
		from = since.Unix()
	}
	rows, err := conn.Query(ctx, requestLogSQL, workspace, from, limit)
	if err != nil {
		return nil, fmt.Errorf("query request log of %s: %w", workspace, err)
	}
	defer rows.Close()
	out := []RequestRow{}
	for rows.Next() {
		var (
			r          RequestRow
			status     uint16
			durationUS uint64
			truncated  uint8
		)
		err := rows.Scan(&r.ID, &r.At, &r.Method, &r.Path, &status, &durationUS, &r.KeyID, &r.KeyKind,
			&r.RequestBody, &r.ResponseBody, &truncated,
			&r.MessageIDs, &r.EventIDs, &r.JourneyRunIDs, &r.ContactIDs,
			&r.Recipient, &r.ExternalID, &r.IP, &r.UserAgent)
		if err != nil {
			return nil, fmt.Errorf("query request log of %s: scan: %w", workspace, err)
		}
		r.At = r.At.UTC()
		r.Status = int(status)
		r.DurationMs = float64(durationUS) / 1000
		r.Truncated = truncated != 0
		for _, ids := range []*[]string{&r.MessageIDs, &r.EventIDs, &r.JourneyRunIDs, &r.ContactIDs} {
			if *ids == nil {
				*ids = []string{}
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query request log of %s: %w", workspace, err)
	}
	return out, nil
}
