package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"sendstream/sinks/webhook"
)

// TestReceiverVerifiesSignatures checks the receivers' sampled check
// against the server's own signing: a delivery signed under the endpoint's
// secret (during a rotation too) verifies, a changed body does not.
func TestReceiverVerifiesSignatures(t *testing.T) {
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	other, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"m1","event":"CONTACT_CREATED","timestamp":"2026-01-02T03:04:05.000Z","teamId":"w","data":{}}`)
	deliver := func(body []byte, secrets ...string) (verified, bad int64) {
		f := &whFleet{}
		r := &whReceiver{key: secretKey(secret)}
		var ctx fasthttp.RequestCtx
		webhook.Sign(secrets, "m1", time.Now(), body).Headers(ctx.Request.Header.Set)
		ctx.Request.SetBody(body)
		f.verify(r, &ctx, ctx.Request.Header.Peek("webhook-signature"))
		return f.verified.Load(), f.badSig.Load()
	}
	if v, b := deliver(body, secret); v != 1 || b != 0 {
		t.Fatalf("signed with the endpoint's secret: verified %d, bad %d; want 1, 0", v, b)
	}
	if v, b := deliver(body, other, secret); v != 1 || b != 0 {
		t.Fatalf("signed during a rotation, the receiver's secret second: verified %d, bad %d; want 1, 0", v, b)
	}
	if v, b := deliver(body, other); v != 0 || b != 1 {
		t.Fatalf("signed with another secret only: verified %d, bad %d; want 0, 1", v, b)
	}
	signed := webhook.Sign([]string{secret}, "m1", time.Now(), body)
	f := &whFleet{}
	var ctx fasthttp.RequestCtx
	signed.Headers(ctx.Request.Header.Set)
	ctx.Request.SetBody(append([]byte(nil), body[:len(body)-1]...))
	f.verify(&whReceiver{key: secretKey(secret)}, &ctx, ctx.Request.Header.Peek("webhook-signature"))
	if f.badSig.Load() != 1 || f.verified.Load() != 0 {
		t.Fatalf("changed body: verified %d, bad %d; want 0, 1", f.verified.Load(), f.badSig.Load())
	}
}

// TestLatencyRecordsFirstAttemptsOfItsWindow checks which first attempts
// the latency phase counts: its own phase's contacts due in its window,
// once per receiver, and that missing ones are counted with their wait.
func TestLatencyRecordsFirstAttemptsOfItsWindow(t *testing.T) {
	from := time.Now().Add(-time.Minute)
	l := newWhLatency("c", from, from.Add(30*time.Second))
	body := func(phase string, due time.Time) []byte {
		return fmt.Appendf(nil, `{"id":"x","event":"CONTACT_CREATED","timestamp":"%s","teamId":"w","data":{"contactId":"c1","email":"wh-%s-%d-7@bench.example.com"}}`,
			due.UTC().Format("2006-01-02T15:04:05.000Z07:00"), phase, due.UnixNano())
	}
	due := from.Add(time.Second)
	now := due.Add(120 * time.Millisecond)
	l.record(3, body("c", due), now)
	l.record(3, body("c", due), now)                                           // the same receiver again: a duplicate
	l.record(4, body("c", due), now)                                           // another receiver
	l.record(3, body("a", due), now)                                           // another phase
	l.record(3, body("c", from.Add(-time.Second)), now)                        // before the window
	l.record(3, []byte(`{"data":{"email":"probe-1@bench.example.com"}}`), now) // not the bench's
	if n := l.fromSend.Count(); n != 2 {
		t.Fatalf("recorded %d first attempts, want 2", n)
	}
	if d := l.duplicates.Load(); d != 1 {
		t.Fatalf("duplicates %d, want 1", d)
	}
	if p := l.fromSend.Quantile(0.5); p < 119*time.Millisecond || p > 122*time.Millisecond {
		t.Fatalf("latency %v, want about 120ms", p)
	}
	if n := l.fromStamp.Count(); n != 2 {
		t.Fatalf("recorded %d latencies from the body timestamp, want 2", n)
	}
	if m := l.missing([]int64{due.UnixNano()}, 5, now); m != 3 {
		t.Fatalf("missing %d of 5 receivers, want 3 (receivers 0, 1, 2)", m)
	}
	if n := l.fromSend.Count(); n != 5 {
		t.Fatalf("after the missing ones: %d recorded, want 5", n)
	}
}
