package mailsink

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe to read while Run writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunServesUntilCancelled: `sendstream mailsink` flags reach Open, the
// listening line is printed, and cancelling ctx (main's signal handling)
// ends it without an error; stray arguments are refused.
func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"--smtp", "127.0.0.1:0", "--http", "127.0.0.1:0", "--dir", t.TempDir(), "--max-messages", "5"}, &out, &errOut)
	}()
	for i := 0; i < 500 && ctx.Err() == nil; i++ {
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v (stderr %s)", err, errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
		if strings.Contains(out.String(), "inbox at http://127.0.0.1:") {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if !strings.HasPrefix(out.String(), "mailsink: SMTP on 127.0.0.1:") {
		t.Fatalf("stdout %q", out.String())
	}
	if err := Run(context.Background(), []string{"extra"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil || err.Error() != `mailsink: unexpected arguments ["extra"]` {
		t.Fatalf("stray argument: %v", err)
	}
}
