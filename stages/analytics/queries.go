package analytics

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The analytics queries users run (documented in ingest/events/README.md,
// served by `sendstream admin analytics`). Each reads the events table
// through LIMIT 1 BY id, so an event inserted twice (at-least-once delivery)
// and not merged yet counts once. They run on ClickHouse 18.16 and current
// ClickHouse.
var (
	//go:embed queries/events_per_day.sql
	EventsPerDaySQL string
	//go:embed queries/revenue_per_day.sql
	RevenuePerDaySQL string
	//go:embed queries/unique_contacts.sql
	UniqueContactsSQL string
)

// Range is a half-open time range [From, To) of occurredAt.
type Range struct{ From, To time.Time }

func (r Range) args() (int64, int64, error) {
	if !r.To.After(r.From) {
		return 0, 0, errors.New("analytics query: empty range (to must be after from)")
	}
	return max(r.From.Unix(), 0), min(r.To.Unix(), 1<<32-1), nil
}

// DayCount is one row of EventsPerDay.
type DayCount struct {
	Day    string `json:"day"` // YYYY-MM-DD (UTC)
	Event  string `json:"event"`
	Events uint64 `json:"events"`
}

// DayRevenue is one row of RevenuePerDay: goal values of one day and
// currency ("" when the goals named none), refunds as a positive amount.
type DayRevenue struct {
	Day         string  `json:"day"`
	Currency    string  `json:"currency"`
	Gross       float64 `json:"gross"`
	Refunds     float64 `json:"refunds"`
	Net         float64 `json:"net"`
	Conversions uint64  `json:"conversions"`
	RefundCount uint64  `json:"refundCount"`
}

// EventContacts is one row of UniqueContacts.
type EventContacts struct {
	Event    string `json:"event"`
	Contacts uint64 `json:"contacts"`
	Events   uint64 `json:"events"`
}

// EventsPerDay counts the events of workspace per day and name.
func EventsPerDay(ctx context.Context, conn driver.Conn, workspace string, r Range) ([]DayCount, error) {
	from, to, err := r.args()
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, EventsPerDaySQL, workspace, from, to)
	if err != nil {
		return nil, fmt.Errorf("events per day: %w", err)
	}
	defer rows.Close()
	out := []DayCount{}
	for rows.Next() {
		var d time.Time
		var c DayCount
		if err := rows.Scan(&d, &c.Event, &c.Events); err != nil {
			return nil, fmt.Errorf("events per day: %w", err)
		}
		c.Day = d.Format(time.DateOnly)
		out = append(out, c)
	}
	return out, rows.Err()
}

// RevenuePerDay sums the goal values of workspace per day and currency, net
// of refunds.
func RevenuePerDay(ctx context.Context, conn driver.Conn, workspace string, r Range) ([]DayRevenue, error) {
	from, to, err := r.args()
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, RevenuePerDaySQL, workspace, from, to)
	if err != nil {
		return nil, fmt.Errorf("revenue per day: %w", err)
	}
	defer rows.Close()
	out := []DayRevenue{}
	for rows.Next() {
		var d time.Time
		var v DayRevenue
		if err := rows.Scan(&d, &v.Currency, &v.Gross, &v.Refunds, &v.Net, &v.Conversions, &v.RefundCount); err != nil {
			return nil, fmt.Errorf("revenue per day: %w", err)
		}
		v.Day = d.Format(time.DateOnly)
		out = append(out, v)
	}
	return out, rows.Err()
}

// UniqueContacts counts the distinct contacts (and the events) of every
// event name of workspace.
func UniqueContacts(ctx context.Context, conn driver.Conn, workspace string, r Range) ([]EventContacts, error) {
	from, to, err := r.args()
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, UniqueContactsSQL, workspace, from, to)
	if err != nil {
		return nil, fmt.Errorf("unique contacts per event: %w", err)
	}
	defer rows.Close()
	out := []EventContacts{}
	for rows.Next() {
		var e EventContacts
		if err := rows.Scan(&e.Event, &e.Contacts, &e.Events); err != nil {
			return nil, fmt.Errorf("unique contacts per event: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
