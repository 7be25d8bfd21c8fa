package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// outboxSettings are the settings of the contacts outbox (ingest/contacts,
// issue 24 item 6). They join Config once config.go is free to change.
type outboxSettings struct {
	// Grace (SENDSTREAM_OUTBOX_GRACE, default 30s, at least 1s) is how old
	// an outbox row must be before the relay publishes it: longer than a
	// request may take to publish its own events.
	Grace time.Duration
	// FaultExitAfterCommit (SENDSTREAM_FAULT_EXIT_AFTER_COMMIT, default 0:
	// off) is a hook of the kill -9 tests only: the process exits right
	// after its N-th committed contacts write, before publishing.
	FaultExitAfterCommit int64
}

// loadOutboxSettings reads outboxSettings from the environment.
func loadOutboxSettings() (outboxSettings, error) {
	var o outboxSettings
	var err error
	if o.Grace, err = time.ParseDuration(env("SENDSTREAM_OUTBOX_GRACE", "30s")); err != nil || o.Grace < time.Second {
		return o, fmt.Errorf("SENDSTREAM_OUTBOX_GRACE %q: want a duration of at least 1s", os.Getenv("SENDSTREAM_OUTBOX_GRACE"))
	}
	if o.FaultExitAfterCommit, err = strconv.ParseInt(env("SENDSTREAM_FAULT_EXIT_AFTER_COMMIT", "0"), 10, 64); err != nil || o.FaultExitAfterCommit < 0 {
		return o, fmt.Errorf("SENDSTREAM_FAULT_EXIT_AFTER_COMMIT %q: want a whole number", os.Getenv("SENDSTREAM_FAULT_EXIT_AFTER_COMMIT"))
	}
	return o, nil
}
