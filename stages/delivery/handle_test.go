package delivery

import (
	"context"
	"strings"
	"testing"

	"sendstream/pipeline"
	"sendstream/schemas"
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
