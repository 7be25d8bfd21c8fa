package journeys_test

import (
	"context"
	"errors"
	"testing"

	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// TestListeningAndMatchedStarts: only active journeys of the workspace
// with that trigger and name (or list) listen; a redelivered match starts
// nothing new, even on a once journey.
func TestListeningAndMatchedStarts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mk := func(src string) journeys.Journey {
		j, _, err := f.store.Create(ctx, f.ws, f.def(t, src))
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	ev := mk(`{"name":"a","status":"active","trigger":{"type":"event","event":"signed_up"},"steps":[{"type":"exit"}]}`)
	mk(`{"name":"b","status":"draft","trigger":{"type":"event","event":"signed_up"},"steps":[{"type":"exit"}]}`)
	web := mk(`{"name":"c","status":"active","trigger":{"type":"website_event","event":"signed_up"},"steps":[{"type":"exit"}]}`)
	list := mk(`{"name":"d","status":"active","trigger":{"type":"list_joined","listId":"LIST"},"steps":[{"type":"exit"}]}`)
	mk(`{"name":"e","status":"active","trigger":{"type":"event","event":"other"},"steps":[{"type":"exit"}]}`)
	for _, c := range []struct {
		trigger, what string
		want          string
	}{
		{"event", "signed_up", ev.ID}, {"website_event", "signed_up", web.ID}, {"list_joined", f.list, list.ID},
		{"event", "nothing", ""}, {"list_joined", "signed_up", ""},
	} {
		got, err := f.store.Listening(ctx, f.ws, c.trigger, c.what)
		if err != nil {
			t.Fatal(err)
		}
		if (c.want == "" && len(got) != 0) || (c.want != "" && (len(got) != 1 || got[0].ID != c.want)) {
			t.Errorf("%s %s: %+v, want %q", c.trigger, c.what, got, c.want)
		}
	}
	if got, _ := f.store.Listening(ctx, schemas.NewID(), "event", "signed_up"); len(got) != 0 {
		t.Errorf("another workspace: %+v", got)
	}
	if _, err := f.store.Listening(ctx, f.ws, "api_event", ""); err == nil {
		t.Error("api_event listening accepted")
	}
	// A match delivered twice: the same execution, started once.
	f.contact(t, "m@example.com", "ACTIVE")
	src := schemas.NewID()
	id := journeys.MatchedExecutionID(src, ev.ID)
	if id != journeys.MatchedExecutionID(src, ev.ID) || id == journeys.MatchedExecutionID(src, web.ID) {
		t.Fatal("MatchedExecutionID is not a function of source and journey")
	}
	in := journeys.StartInput{Workspace: f.ws, JourneyID: ev.ID, Trigger: "event", Email: "m@example.com", ExecutionID: id, SourceID: src}
	first, err := f.start(t, in)
	if err != nil || first.Existing {
		t.Fatalf("first delivery: %+v %v", first, err)
	}
	again, err := f.start(t, in)
	if err != nil || !again.Existing || again.ID != first.ID || again.SourceID != src {
		t.Fatalf("redelivery: %+v %v", again, err)
	}
	// Another event on the once journey is refused.
	in.ExecutionID = journeys.MatchedExecutionID(schemas.NewID(), ev.ID)
	if _, err := f.start(t, in); !errors.Is(err, journeys.ErrReentry) {
		t.Fatalf("second event on a once journey: %v", err)
	}
}
