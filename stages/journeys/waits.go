package journeys

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// ContactTimeZoneField is the custom field that holds a contact's IANA time
// zone for wait_until steps in the contact's time zone.
const ContactTimeZoneField = "timeZone"

// waitEnd returns when the wait of step st of run, begun at now, ends:
// delay after its duration, wait_for_event after its timeout, wait_until at
// the next st.Time in the contact's or the workspace's time zone.
func (s *Stage) waitEnd(ctx context.Context, tx pgx.Tx, run journeys.Run, st *schemas.JourneyStep, now time.Time) (time.Time, error) {
	switch st.Type {
	case schemas.StepDelay, schemas.StepWaitForEvent:
		v := st.Duration
		if st.Type == schemas.StepWaitForEvent {
			v = st.Timeout
		}
		d, ok := schemas.ParseJourneyDuration(v)
		if !ok {
			return time.Time{}, pipeline.Permanent(fmt.Errorf("step %s: duration %q", run.Position, v))
		}
		return now.Add(d), nil
	case schemas.StepWaitUntil:
		loc := time.UTC // workspaces have no time zone yet: UTC
		if st.TimeZone == schemas.TimeZoneContact {
			f, err := s.o.Store.ContactFacts(ctx, tx, run.ContactID)
			if err != nil {
				return time.Time{}, err
			}
			loc = contactZone(f.CustomFields, loc)
		}
		return nextTimeOfDay(now, st.Time, loc)
	}
	return time.Time{}, pipeline.Permanent(fmt.Errorf("step %s: %s does not wait", run.Position, st.Type))
}

// contactZone is the IANA zone in the contact's timeZone custom field, or
// def when it holds none.
func contactZone(custom map[string]any, def *time.Location) *time.Location {
	name, _ := custom[ContactTimeZoneField].(string)
	if name == "" {
		return def
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return def
	}
	return loc
}

// nextTimeOfDay returns the first moment after now whose wall clock in loc
// reads hhmm ("HH:MM"). On a day where that wall time does not exist
// (inside a daylight-saving gap) it is the moment that wall time names
// under the offset before the change: 02:30 on a day clocks jump from
// 02:00 to 03:00 is 03:30 after the jump.
func nextTimeOfDay(now time.Time, hhmm string, loc *time.Location) (time.Time, error) {
	var h, m int
	if _, err := fmt.Sscanf(hhmm, "%d:%d", &h, &m); err != nil || h < 0 || h > 23 || m < 0 || m > 59 {
		return time.Time{}, pipeline.Permanent(fmt.Errorf("wait_until: time %q is not HH:MM", hhmm))
	}
	local := now.In(loc)
	for day := 0; day < 3; day++ {
		t := time.Date(local.Year(), local.Month(), local.Day()+day, h, m, 0, 0, loc)
		if w := t.In(loc); w.Hour() != h || w.Minute() != m { // in a gap
			t = time.Date(local.Year(), local.Month(), local.Day()+day, h, m, 0, 0, time.FixedZone("", offsetBefore(t, loc)))
		}
		if t.After(now) {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("wait_until %s: no such time in the next days in %s", hhmm, loc)
}

// offsetBefore is loc's UTC offset (seconds) a few hours before t: the
// offset in force before a change at t.
func offsetBefore(t time.Time, loc *time.Location) int {
	_, off := t.Add(-6 * time.Hour).In(loc).Zone()
	return off
}
