package main

import (
	"encoding/json"
	"testing"

	"sendstream/bench/baseline"
	"sendstream/ingest/events"
)

func TestEventBodiesAreValidEvents(t *testing.T) {
	for _, n := range []uint64{0, 7, 999999, 1000001, 1 << 40} {
		b := eventBody(nil, n)
		if len(b) != baseline.EventBodyLen {
			t.Fatalf("body %d is %d bytes: %s", n, len(b), b)
		}
		if _, errs := events.Parse(b, true); len(errs) > 0 {
			t.Fatalf("body %s: %+v", b, errs)
		}
	}
	var imp struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(importBody(nil, 3), &imp); err != nil || len(imp.Events) != baseline.ImportRows {
		t.Fatalf("import body: %v (%d rows)", err, len(imp.Events))
	}
}
