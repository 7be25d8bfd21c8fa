// Package schemas holds the shapes every part of Sendstream agrees on: the
// pipeline envelope, topic names, and the embedded Postgres, ClickHouse and
// OpenAPI definitions. It imports nothing of ours.
package schemas

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
)

// Envelope is the one JSON value carried on every pipeline topic. ID is minted
// once at ingest (or derived from an idempotency key) and envelopes produced
// while handling another get deterministic ids from ChildID, so every side
// effect can be keyed by ID.
type Envelope struct {
	ID          string          `json:"id"`
	Workspace   string          `json:"workspace"`
	Type        string          `json:"type"` // noun.verb.v1
	Key         string          `json:"key"`  // partition key
	OccurredAt  time.Time       `json:"occurredAt"`
	Attempt     int             `json:"attempt"`
	CausationID string          `json:"causationId,omitempty"`
	Traceparent string          `json:"traceparent,omitempty"`
	Payload     json.RawMessage `json:"payload"`
	// PayloadCompact promises that Payload is valid JSON without
	// insignificant whitespace, as this module's own encoders write it, so
	// AppendEnvelope copies it without checking. DecodeEnvelope sets it
	// for a payload it checked; whoever copies an Envelope and replaces
	// its Payload must set it again. Not serialised.
	PayloadCompact bool `json:"-"`
}

// NewID returns a fresh random id: 32 hex characters whose first 12 encode the
// current Unix milliseconds, so ids sort roughly by creation time.
func NewID() string { return NewIDAt(time.Now()) }

// NewIDAt is NewID with t as the current time, for callers that already
// read the clock.
func NewIDAt(t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	var h [32]byte
	hex.Encode(h[:], b[:])
	return string(h[:]) // one allocation; EncodeToString makes two
}

// IDFromKey derives a stable id from a workspace, a scope (such as "event" or
// "send") and a client's idempotency key, so a retried request maps to the
// same envelope id.
func IDFromKey(workspace, scope, key string) string {
	return hashID(workspace, scope, key)
}

// ChildID derives the id of the index-th envelope of type typ produced while
// handling parent, so a replay produces the same ids.
func ChildID(parent, typ string, index int) string {
	return hashID(parent, typ, strconv.Itoa(index))
}

func hashID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
