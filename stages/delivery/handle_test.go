package delivery

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/email"
)

// TestHandleRefusesPayloadsThatAreNotJSON: the runner hands this stage its
// envelopes' payloads unchecked (UncheckedPayload), so Handle itself must
// refuse, as permanent, any send payload that is not valid JSON, including
// one whose only fault is in a member it does not read, or in a long source
// that the source cache has not seen.
func TestHandleRefusesPayloadsThatAreNotJSON(t *testing.T) {
	if reg, ok := pipeline.Lookup(Name); !ok || !reg.UncheckedPayload {
		t.Fatal("the stage is registered without UncheckedPayload; this test would not matter")
	}
	s := &Stage{sources: schemas.NewSourceCache(1<<20, false)}
	long := strings.Repeat("x", 600)
	for _, payload := range []string{
		`{"to":"a@b.test","other":"` + "\x01" + `"}`,
		`{"to":"a@b.test","html":"` + long + `\q"}`,
		`{"to":"a@b.test","policy":{"id":"p","x":"\u00zz"}}`,
		`{"to":"a@b.test","data":"\x"}`,
		`{"to":"a@b.test"} trailing`,
		`{"to":"a@b.test",`,
	} {
		_, err := s.Handle(context.Background(), schemas.Envelope{ID: "e1", Workspace: "ws", Type: schemas.TypeTransactionalSend, Payload: []byte(payload)})
		if err == nil || !pipeline.IsPermanent(err) {
			t.Errorf("Handle(%q) = %v, want a permanent error", payload, err)
		}
	}
}

// gatedProvider is a provider whose breaker is open: any send is a test
// failure.
type gatedProvider struct{ t *testing.T }

func (gatedProvider) Name() string  { return "gated" }
func (gatedProvider) Blocked() bool { return true }
func (p gatedProvider) Send(context.Context, *email.Message) (email.Receipt, error) {
	p.t.Error("a message went to a provider whose breaker is open")
	return email.Receipt{}, errors.New("blocked")
}

// TestBlockedProviderTakesNothing: while a provider's breaker is open,
// Handle returns an error wrapping pipeline.ErrBreakerOpen (the runner
// waits without using up the envelope's retries) and claims nothing in
// Postgres (the stage has no store here: a claim would panic), renders
// nothing and sends nothing.
func TestBlockedProviderTakesNothing(t *testing.T) {
	s := &Stage{sources: schemas.NewSourceCache(1<<20, false), providers: map[string]email.Provider{"gated": gatedProvider{t}}}
	payload := `{"messageId":"m1","to":"a@b.test","policy":{"id":"p","provider":"gated"},"subject":"s","html":"<p>x</p>"}`
	_, err := s.Handle(context.Background(), schemas.Envelope{ID: "m1", Workspace: "ws", Type: schemas.TypeTransactionalSend, Payload: []byte(payload)})
	if !errors.Is(err, pipeline.ErrBreakerOpen) || pipeline.IsPermanent(err) {
		t.Fatalf("Handle = %v, want an error wrapping ErrBreakerOpen", err)
	}
}

// TestOtherEnvelopesAreSkipped: the stage reads only sends; a status
// envelope (which goes to a topic of its own anyway) is skipped unread.
func TestOtherEnvelopesAreSkipped(t *testing.T) {
	s := &Stage{}
	outs, err := s.Handle(context.Background(), schemas.Envelope{ID: "x", Type: schemas.TypeTransactionalStatus, Payload: []byte(`not json`)})
	if err != nil || outs != nil {
		t.Errorf("Handle(status) = %v, %v; want skipped", outs, err)
	}
	if reg, _ := pipeline.Lookup(Name); reg.Consumes != schemas.TopicTransactional || reg.Concurrency < 2 ||
		slices.Contains(reg.Produces, schemas.TopicTransactional) || reg.Route(schemas.Envelope{Type: schemas.TypeTransactionalStatus}) != schemas.TopicMessageStatus {
		t.Errorf("registration %+v: want keyed, reading sends, statuses to TopicMessageStatus and nothing back to its own topic", reg)
	}
}
