// Package webhooklog reads the webhook delivery log back from ClickHouse
// (tables webhook_attempts and webhook_messages, which the stages of
// stages/webhooklog write) and publishes logged messages again: the
// attempts `admin webhook deliveries` and the dashboard's endpoint page
// list, and the messages `admin webhook replay` and the dashboard's Replay
// button send again. It needs no stage runtime, so the stages and ingest
// both import it.
package webhooklog

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/schemas"
)

// This file reads the log back: the attempts Deliveries lists and the
// messages MessageTargets and TargetMessages find to send again.

var (
	//go:embed deliveries.sql
	deliveriesSQL string
	//go:embed replay_message.sql
	replayMessageSQL string
	//go:embed replay_target.sql
	replayTargetSQL string
	//go:embed attempts_max.sql
	attemptsMaxSQL string
)

// Outcome classes of Filter.Status.
const (
	StatusOK     = "ok"     // outcome ok
	StatusFailed = "failed" // every outcome but ok
)

// Filter selects attempts of one workspace; empty fields select all.
type Filter struct {
	Workspace string
	TargetID  string // an endpoint or subscription id
	Event     string // a public event name, e.g. CONTACT_CREATED
	Status    string // "", StatusOK or StatusFailed
	Limit     int    // at least 1
}

// Delivery is one attempt as `admin webhook deliveries` prints it and the
// dashboard's endpoint page shows it.
type Delivery struct {
	ID            string     `json:"id"`
	TargetKind    string     `json:"targetKind"`
	TargetID      string     `json:"targetId"`
	URL           string     `json:"url"`
	Event         string     `json:"event"`
	MessageID     string     `json:"messageId"`
	Attempt       int        `json:"attempt"`
	Outcome       string     `json:"outcome"`
	StatusCode    int        `json:"statusCode"` // 0: no answer
	DurationMs    float64    `json:"durationMs"`
	Error         string     `json:"error,omitempty"`
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	At            time.Time  `json:"at"`
	Replay        bool       `json:"replay"`
}

// Deliveries returns the attempts f selects, newest first, at most f.Limit.
func Deliveries(ctx context.Context, conn driver.Conn, f Filter) ([]Delivery, error) {
	if f.Workspace == "" {
		return nil, errors.New("webhook deliveries: empty workspace")
	}
	if f.Status != "" && f.Status != StatusOK && f.Status != StatusFailed {
		return nil, fmt.Errorf("webhook deliveries: status %q: want ok or failed", f.Status)
	}
	if f.Limit < 1 {
		return nil, fmt.Errorf("webhook deliveries: limit %d: want at least 1", f.Limit)
	}
	rows, err := conn.Query(ctx, deliveriesSQL, f.Workspace, f.TargetID, f.TargetID, f.Event, f.Event, f.Status, f.Status, uint64(f.Limit))
	if err != nil {
		return nil, fmt.Errorf("webhook deliveries of %s: %w", f.Workspace, err)
	}
	defer rows.Close()
	out := []Delivery{}
	for rows.Next() {
		var (
			d       Delivery
			attempt uint32
			status  uint16
			next    time.Time
			replay  uint8
		)
		if err := rows.Scan(&d.ID, &d.TargetKind, &d.TargetID, &d.URL, &d.Event, &d.MessageID, &attempt,
			&d.Outcome, &status, &d.DurationMs, &d.Error, &next, &d.At, &replay); err != nil {
			return nil, fmt.Errorf("webhook deliveries of %s: scan: %w", f.Workspace, err)
		}
		d.Attempt, d.StatusCode, d.Replay, d.At = int(attempt), int(status), replay != 0, d.At.UTC()
		if next.Unix() > 0 {
			n := next.UTC()
			d.NextAttemptAt = &n
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("webhook deliveries of %s: %w", f.Workspace, err)
	}
	return out, nil
}

// Logged is a message as published for one target, from webhook_messages:
// the delivery to publish again, with the highest attempt number seen in
// webhook_messages or webhook_attempts.
type Logged struct {
	Workspace string
	Delivery  schemas.WebhookDelivery
}

// MessageTargets returns every target message id was published for in the
// workspace, by target id.
func MessageTargets(ctx context.Context, conn driver.Conn, workspace, messageID string) ([]Logged, error) {
	return queryLogged(ctx, conn, workspace, replayMessageSQL, workspace, messageID)
}

// TargetMessages returns every message published for the target whose
// first attempt was due at or after since, oldest first.
func TargetMessages(ctx context.Context, conn driver.Conn, workspace, targetID string, since time.Time) ([]Logged, error) {
	return queryLogged(ctx, conn, workspace, replayTargetSQL, workspace, targetID, max(since.Unix(), 0))
}

// queryLogged runs replay_message.sql or replay_target.sql.
func queryLogged(ctx context.Context, conn driver.Conn, workspace, sql string, args ...any) ([]Logged, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("webhook messages of %s: %w", workspace, err)
	}
	defer rows.Close()
	var out []Logged
	for rows.Next() {
		var (
			d       schemas.WebhookDelivery
			attempt uint32
			body    string
		)
		if err := rows.Scan(&d.MessageID, &d.TargetID, &d.TargetKind, &d.URL, &d.Event, &d.FirstAt, &attempt, &body); err != nil {
			return nil, fmt.Errorf("webhook messages of %s: scan: %w", workspace, err)
		}
		d.FirstAt, d.Attempt, d.Body = d.FirstAt.UTC(), int(attempt), []byte(body)
		out = append(out, Logged{Workspace: workspace, Delivery: d})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("webhook messages of %s: %w", workspace, err)
	}
	if len(out) == 0 {
		return out, nil
	}
	return raiseToLogged(ctx, conn, workspace, out)
}

// raiseToLogged raises each delivery's attempt number to the highest one
// webhook_attempts holds for its message and target.
func raiseToLogged(ctx context.Context, conn driver.Conn, workspace string, ls []Logged) ([]Logged, error) {
	ids := make([]string, 0, len(ls))
	seen := make(map[string]bool, len(ls))
	for _, l := range ls {
		if !seen[l.Delivery.MessageID] {
			seen[l.Delivery.MessageID] = true
			ids = append(ids, l.Delivery.MessageID)
		}
	}
	rows, err := conn.Query(ctx, attemptsMaxSQL, workspace, ids)
	if err != nil {
		return nil, fmt.Errorf("webhook attempts of %s: %w", workspace, err)
	}
	defer rows.Close()
	highest := make(map[string]int, len(ls))
	for rows.Next() {
		var msg, target string
		var attempt uint32
		if err := rows.Scan(&msg, &target, &attempt); err != nil {
			return nil, fmt.Errorf("webhook attempts of %s: scan: %w", workspace, err)
		}
		highest[msg+"/"+target] = int(attempt)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("webhook attempts of %s: %w", workspace, err)
	}
	for i := range ls {
		d := &ls[i].Delivery
		d.Attempt = max(d.Attempt, highest[d.MessageID+"/"+d.TargetID])
	}
	return ls, nil
}
