package pipeline

import (
	"time"

	"sendstream/schemas"
)

// This file holds the payload of the dead-letter topic.

// TypeDeadLettered is the envelope type of every envelope on
// schemas.TopicDeadLetter; its payload is a DeadLetter.
const TypeDeadLettered = "pipeline.deadlettered.v1"

// DeadLetter is the payload of a dead-letter envelope: the envelope a stage
// gave up on, wrapped with where it came from and why. The dead-letter
// envelope's id is ChildID(original id, "deadletter."+stage, 0), so a replay
// dead-letters to the same id; its key, workspace and traceparent are the
// original's and its causationId is the original id.
type DeadLetter struct {
	Stage     string            `json:"stage"`
	Topic     string            `json:"topic"` // full topic name, prefix included
	Partition int               `json:"partition"`
	Offset    int64             `json:"offset"`
	Error     string            `json:"error"`
	Permanent bool              `json:"permanent"` // false: retries were exhausted
	Attempts  int               `json:"attempts"`  // calls of Handle made
	FailedAt  time.Time         `json:"failedAt"`
	Envelope  *schemas.Envelope `json:"envelope,omitempty"` // the failed envelope, Attempt as last tried
	Raw       []byte            `json:"raw,omitempty"`      // the record value when it was not an envelope
}
