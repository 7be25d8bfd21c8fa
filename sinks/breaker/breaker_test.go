package breaker

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// permanent is an error marked as pipeline.Permanent marks them.
type permanent struct{ error }

func (permanent) Permanent() bool { return true }

func TestBreakerOpensHalfOpensCloses(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := Config{ConsecutiveFailures: 3, OpenFor: 100 * time.Millisecond, Metrics: reg}.New("smtp")
	ctx := context.Background()
	boom := errors.New("connection refused")
	calls := 0
	fail := func(context.Context) error { calls++; return boom }
	ok := func(context.Context) error { calls++; return nil }

	// Permanent errors do not count towards tripping.
	for i := 0; i < 5; i++ {
		_ = b.Do(ctx, func(context.Context) error { return permanent{errors.New("bad address")} })
	}
	if b.State() != "closed" {
		t.Fatalf("state after permanent errors = %s", b.State())
	}
	for i := 0; i < 3; i++ {
		if err := b.Do(ctx, fail); !errors.Is(err, boom) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if b.State() != "open" {
		t.Fatalf("state after 3 failures = %s", b.State())
	}
	err := b.Do(ctx, fail)
	if !errors.Is(err, ErrOpen) || isPermanent(err) || calls != 3 {
		t.Fatalf("open breaker: err=%v permanent=%v calls=%d", err, isPermanent(err), calls)
	}
	if !strings.Contains(metricsText(t, reg), `sendstream_breaker_state{breaker="smtp"} 2`) {
		t.Fatalf("state gauge not open:\n%s", metricsText(t, reg))
	}

	// After OpenFor one trial call goes through; its failure opens again.
	time.Sleep(120 * time.Millisecond)
	if b.State() != "half-open" {
		t.Fatalf("state after OpenFor = %s", b.State())
	}
	if err := b.Do(ctx, fail); !errors.Is(err, boom) || calls != 4 {
		t.Fatalf("half-open trial: %v calls=%d", err, calls)
	}
	if b.State() != "open" {
		t.Fatalf("state after failed trial = %s", b.State())
	}

	// A successful trial closes it.
	time.Sleep(120 * time.Millisecond)
	if err := b.Do(ctx, ok); err != nil {
		t.Fatal(err)
	}
	if b.State() != "closed" {
		t.Fatalf("state after successful trial = %s", b.State())
	}
	text := metricsText(t, reg)
	for _, want := range []string{
		`sendstream_breaker_state{breaker="smtp"} 0`,
		`sendstream_breaker_rejected_total{breaker="smtp"} 1`,
		`sendstream_breaker_transitions_total{breaker="smtp",to="open"} 2`,
		`sendstream_breaker_transitions_total{breaker="smtp",to="closed"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
}

func TestBreakerCancelledContext(t *testing.T) {
	b := Config{ConsecutiveFailures: 1, Metrics: prometheus.NewRegistry()}.New("x")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	if err := b.Do(ctx, func(context.Context) error { called = true; return nil }); !errors.Is(err, context.Canceled) || called {
		t.Fatalf("Do with a cancelled ctx: %v called=%v", err, called)
	}
	// A call cancelled midway is not the dependency's fault.
	_ = b.Do(context.Background(), func(context.Context) error { return context.Canceled })
	if b.State() != "closed" {
		t.Fatalf("state = %s", b.State())
	}
}

func metricsText(t *testing.T, r prometheus.Gatherer) string {
	t.Helper()
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

// A second breaker of the same name on one registerer shares the counters
// and takes the state gauge over; different names get their own series.
func TestBreakerSameNameTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := Config{ConsecutiveFailures: 1, Metrics: reg}.New("pg")
	_ = a.Do(context.Background(), func(context.Context) error { return errors.New("down") })
	b := Config{ConsecutiveFailures: 1, Metrics: reg}.New("pg")
	Config{Metrics: reg}.New("ch")
	text := metricsText(t, reg)
	for _, want := range []string{
		`sendstream_breaker_state{breaker="pg"} 0`, // b's state
		`sendstream_breaker_state{breaker="ch"} 0`,
		`sendstream_breaker_transitions_total{breaker="pg",to="open"} 1`, // a's trip
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
	if a.State() != "open" || b.State() != "closed" {
		t.Fatalf("states %s %s", a.State(), b.State())
	}
}
