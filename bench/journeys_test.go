package main

import (
	"context"
	"net/smtp"
	"strings"
	"testing"
	"time"
)

// TestJnSinkTellsLostFromDoubled sends mail to the journeys benchmark's
// sink over loopback SMTP and checks its verdict: a contact with no
// message is lost, one with two is doubled, a message to anyone else is
// counted apart.
func TestJnSinkTellsLostFromDoubled(t *testing.T) {
	env, cleanup, err := prepareJnSink(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if len(env) != 1 || !strings.HasPrefix(env[0], "SENDSTREAM_SMTP_URL=smtp://") {
		t.Fatalf("env %v", env)
	}
	sk, err := currentJnSink()
	if err != nil {
		t.Fatal(err)
	}
	send := func(to ...string) {
		t.Helper()
		msg := "Subject: hi\r\n\r\nhello\r\n"
		if err := smtp.SendMail(sk.addr, nil, "from@bench.example.com", to, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	send("jt-b-0@bench.example.com")
	send("JT-B-1@bench.example.com")
	send("jt-b-1@bench.example.com", "someone@else.example.com")
	due := map[string]jnDue{
		"e0": {email: "jt-b-0@bench.example.com", due: time.Now()},
		"e1": {email: "jt-b-1@bench.example.com", due: time.Now()},
		"e2": {email: "jt-b-2@bench.example.com", due: time.Now()},
	}
	lost, doubled, strangers := jnEmails(sk, due)
	if lost != 1 || doubled != 1 || strangers != 1 {
		t.Fatalf("lost %d, doubled %d, to others %d; want 1, 1, 1", lost, doubled, strangers)
	}
	if n := sk.total.Load(); n != 4 {
		t.Fatalf("total %d, want 4 (one per recipient)", n)
	}
}

// TestQuantileNearestRank checks the lateness quantiles.
func TestQuantileNearestRank(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 50}, {0.99, 99}, {1, 100}, {0.001, 1}} {
		if got := quantile(xs, c.q); got != c.want {
			t.Errorf("quantile(%g) = %g, want %g", c.q, got, c.want)
		}
	}
	if quantile(nil, 0.99) != 0 {
		t.Error("empty: want 0")
	}
}
