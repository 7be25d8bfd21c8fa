package pipelinetest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// HookRecorder is a local HTTP receiver for webhook deliveries: it keeps
// each request's JSON body under its X-Webhook-Event header and answers
// 204. It closes when the test ends.
type HookRecorder struct {
	// URL is the receiver's base URL (http on loopback).
	URL string

	mu      sync.Mutex
	got     map[string][]map[string]any // event name → bodies
	arrived chan struct{}
}

// NewHookRecorder starts a HookRecorder; a body that is not a JSON object
// fails t.
func NewHookRecorder(t testing.TB) *HookRecorder {
	t.Helper()
	h := &HookRecorder{got: map[string][]map[string]any{}, arrived: make(chan struct{}, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var b map[string]any
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Errorf("body %s: %v", raw, err)
		}
		event := r.Header.Get("X-Webhook-Event")
		h.mu.Lock()
		h.got[event] = append(h.got[event], b)
		h.mu.Unlock()
		select {
		case h.arrived <- struct{}{}:
		default: // a wake-up is already pending
		}
		w.WriteHeader(204)
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

// Bodies returns a copy of the bodies received for event.
func (h *HookRecorder) Bodies(event string) []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.got[event]...)
}

// WaitFor waits until n bodies for event have arrived; it fails t when ctx
// ends first.
func (h *HookRecorder) WaitFor(ctx context.Context, t testing.TB, event string, n int) {
	t.Helper()
	for len(h.Bodies(event)) < n {
		select {
		case <-h.arrived:
		case <-ctx.Done():
			t.Fatalf("%d %s deliveries, want %d", len(h.Bodies(event)), event, n)
		}
	}
}
