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
	AppID         string    `json:"appId"`    // OAuth access tokens: the app; "" otherwise
	MemberID      string    `json:"memberId"` // OAuth access tokens: the member it acts as
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
	return FindRequests(ctx, conn, workspace, RequestFilter{Since: since, Limit: limit})
}

// RequestFilter selects request-log rows for FindRequests. Zero fields
// select everything.
type RequestFilter struct {
	Since       time.Time // at or after (second precision)
	Status      int       // exactly this status
	StatusClass int       // 1 to 5: the status's hundreds (4 is 4xx)
	Path        string    // the path contains this
	KeyID       string    // made with this credential (Identity.KeyID)
	Limit       int       // as QueryRequests's limit
}

// FindRequests is QueryRequests with filters, which travel as bound
// parameters of one SQL statement. A status outside 100-599 or a class
// outside 1-5 is an error.
func FindRequests(ctx context.Context, conn driver.Conn, workspace string, f RequestFilter) ([]RequestRow, error) {
	if workspace == "" {
		return nil, errors.New("query request log: empty workspace")
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultRequestsLimit
	}
	if limit < 0 || limit > MaxRequestsLimit {
		return nil, fmt.Errorf("query request log: limit %d: must be 1 to %d", limit, MaxRequestsLimit)
	}
	if f.Status != 0 && (f.Status < 100 || f.Status > 599) {
		return nil, fmt.Errorf("query request log: status %d: must be 100 to 599", f.Status)
	}
	if f.StatusClass < 0 || f.StatusClass > 5 {
		return nil, fmt.Errorf("query request log: status class %d: must be 1 to 5", f.StatusClass)
	}
	var from int64
	if !f.Since.IsZero() && f.Since.Unix() > 0 {
		from = f.Since.Unix()
	}
	status, class := uint16(f.Status), uint16(f.StatusClass)
	rows, err := conn.Query(ctx, requestLogSQL, workspace, from, status, status, class, class,
		f.Path, f.Path, f.KeyID, f.KeyID, limit)
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
		err := rows.Scan(&r.ID, &r.At, &r.Method, &r.Path, &status, &durationUS, &r.KeyID, &r.KeyKind, &r.AppID, &r.MemberID,
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
