package journeys

import (
	"context"
	"errors"
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

// nextTimeOfDay is journeys.NextTimeOfDay, a time that is not HH:MM a
// permanent failure.
func nextTimeOfDay(now time.Time, hhmm string, loc *time.Location) (time.Time, error) {
	t, err := journeys.NextTimeOfDay(now, hhmm, loc)
	if errors.Is(err, journeys.ErrTimeOfDay) {
		return time.Time{}, pipeline.Permanent(err)
	}
	return t, err
}
