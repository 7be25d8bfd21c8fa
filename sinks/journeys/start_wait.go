package journeys

import (
	"errors"
	"fmt"
	"time"

	"sendstream/schemas"
)

// A start whose journey begins with a wait whose end needs nothing read
// (delay, wait_for_event, wait_until in UTC) can insert the execution
// already waiting at that step: StartMany then writes next_wake_at (and
// wait_event) with the execution and the scope of the wake relay that
// fires it (wake_relay.go), so the engine has nothing to do for the
// started announcement (what it would have done: move the execution into
// the wait and store a timer, in a transaction of its own).

// FirstWait is the first step of version Version of a start's journey,
// when it is a wait StartMany may begin (StartsWaiting), and the scope
// whose wake relay (RelayWakes) fires it: the execution is its own timer.
type FirstWait struct {
	Version int
	Step    *schemas.JourneyStep
	Scope   string
}

// ErrTimeOfDay is a wait_until time that is not "HH:MM".
var ErrTimeOfDay = errors.New("wait_until: time is not HH:MM")

// StartsWaiting reports whether an execution at step st can be put into
// its wait without reading anything under its lock: a delay, a
// wait_for_event, or a wait_until in the workspace's time zone (UTC).
func StartsWaiting(st *schemas.JourneyStep) bool {
	switch st.Type {
	case schemas.StepDelay, schemas.StepWaitForEvent:
		return true
	case schemas.StepWaitUntil:
		return st.TimeZone != schemas.TimeZoneContact
	}
	return false
}

// WaitEnd returns when the wait of step st begun at now ends and the
// event it waits for ("" for none), for a step StartsWaiting accepts:
// a delay after its duration, a wait_for_event after its timeout, a
// wait_until at the next st.Time in UTC (workspaces have no zone yet).
func WaitEnd(st *schemas.JourneyStep, now time.Time) (time.Time, string, error) {
	switch st.Type {
	case schemas.StepDelay, schemas.StepWaitForEvent:
		v, event := st.Duration, ""
		if st.Type == schemas.StepWaitForEvent {
			v, event = st.Timeout, st.Event
		}
		d, ok := schemas.ParseJourneyDuration(v)
		if !ok {
			return time.Time{}, "", fmt.Errorf("%s: duration %q", st.Type, v)
		}
		return now.Add(d), event, nil
	case schemas.StepWaitUntil:
		if st.TimeZone == schemas.TimeZoneContact {
			return time.Time{}, "", errors.New("wait_until in the contact's time zone reads the contact")
		}
		t, err := NextTimeOfDay(now, st.Time, time.UTC)
		return t, "", err
	}
	return time.Time{}, "", fmt.Errorf("%s does not wait", st.Type)
}

// NextTimeOfDay returns the first moment after now whose wall clock in loc
// reads hhmm ("HH:MM"; otherwise ErrTimeOfDay). On a day where that wall
// time does not exist (inside a daylight-saving gap) it is the moment that
// wall time names under the offset before the change: 02:30 on a day
// clocks jump from 02:00 to 03:00 is 03:30 after the jump.
func NextTimeOfDay(now time.Time, hhmm string, loc *time.Location) (time.Time, error) {
	var h, m int
	if _, err := fmt.Sscanf(hhmm, "%d:%d", &h, &m); err != nil || h < 0 || h > 23 || m < 0 || m > 59 {
		return time.Time{}, fmt.Errorf("%w: %q", ErrTimeOfDay, hhmm)
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

// StartWake is the wake-up envelope of execution e started waiting by
// StartMany (e.NextWakeAt set), due at *e.NextWakeAt: the envelope the
// engine would have stored a timer for had it moved e into the wait
// after its start (same id, so the timer is unique by it either way),
// caused by e's started announcement.
func StartWake(e Execution) schemas.Envelope {
	w := schemas.JourneyWake{ExecutionID: e.ID, Position: e.Position, DueAt: e.NextWakeAt.UTC()}
	id := schemas.ChildID(e.ID+"/"+e.Position, schemas.TypeJourneyWake, 0)
	return schemas.JourneyWakeEnvelope(id, e.Workspace, e.Workspace+":"+e.ContactID, schemas.JourneyStartedEnvelopeID(e.ID), w)
}
