package clickhouse

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

//go:embed sql/messages_per_day.sql
var messagesPerDaySQL string

// DayCount is how many messages reached Status on Day (midnight UTC).
type DayCount struct {
	Day      time.Time
	Status   string
	Messages uint64
}

// MessagesPerDay counts, per day and status, the workspace's messages that
// reached the status at or after since (the message_status table the
// messagelog stage writes), oldest day first. Days without a change are
// absent. The dashboard's message-log chart reads it.
func MessagesPerDay(ctx context.Context, conn driver.Conn, workspace string, since time.Time) ([]DayCount, error) {
	if workspace == "" {
		return nil, errors.New("messages per day: empty workspace")
	}
	var from int64
	if since.Unix() > 0 {
		from = since.Unix()
	}
	rows, err := conn.Query(ctx, messagesPerDaySQL, workspace, from)
	if err != nil {
		return nil, fmt.Errorf("messages per day of %s: %w", workspace, err)
	}
	defer rows.Close()
	out := []DayCount{}
	for rows.Next() {
		var d DayCount
		if err := rows.Scan(&d.Day, &d.Status, &d.Messages); err != nil {
			return nil, fmt.Errorf("messages per day of %s: scan: %w", workspace, err)
		}
		d.Day = time.Date(d.Day.Year(), d.Day.Month(), d.Day.Day(), 0, 0, 0, 0, time.UTC)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("messages per day of %s: %w", workspace, err)
	}
	return out, nil
}
