package delivery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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
	s := &Stage{sources: schemas.NewSourceCache(1<<20, false), inflight: map[string]bool{}}
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
	if len(s.inflight) != 0 {
		t.Fatalf("refused envelopes left in hand: %v", s.inflight)
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

// TestBlockedProviderTakesNothing: while a provider's breaker is open, its
// messages in hand wait in memory; none is claimed in Postgres (the stage
// has no pool here: a claim would panic), rendered or sent.
func TestBlockedProviderTakesNothing(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	s := &Stage{cfg: Config{RetryMin: time.Hour, RetryMax: time.Hour, Now: time.Now}, providers: map[string]email.Provider{"gated": gatedProvider{t}},
		queue: make(chan *job, 4), runCtx: ctx}
	batch := []*job{{p: schemas.SendPayload{MessageID: "m1", Policy: schemas.PolicyRef{Provider: "gated"}}},
		{p: schemas.SendPayload{MessageID: "m2", Policy: schemas.PolicyRef{Provider: "gated"}}}}
	s.process(batch)
	for _, j := range batch {
		if j.attempts != 1 || j.notBefore.IsZero() {
			t.Errorf("%s: attempts %d, not before %v; want it put back for later", j.p.MessageID, j.attempts, j.notBefore)
		}
	}
}
