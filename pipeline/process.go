package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"sendstream/schemas"
)

// This file holds what happens to one envelope, whichever loop runs it:
// Handle with retries and breaker-aware waits, routing of its outputs, the
// dead-letter topic, and the publish of outputs.

// errAbandoned reports that ctx ended while an envelope was still being
// retried: it is neither done nor dead-lettered and must be read again.
var errAbandoned = errors.New("envelope abandoned for drain")

// output is one envelope Handle returned, with the topic it goes to.
type output struct {
	topic string
	env   schemas.Envelope
}

// process handles one fetched record: decode (undecodable records are
// dead-lettered), Handle with retries, routing of the outputs, or the
// dead-letter topic. It returns the routed outputs of a handled envelope
// (none when it was dead-lettered), or an error when the envelope is not
// finished: errAbandoned when ctx ended during a retry wait or workCtx
// ended mid-Handle, or the dead-letter publish failed. The outputs are
// appended to dst (the serial loop reuses one buffer). ctx is the stage's
// context (its end stops retry waits); workCtx bounds the work in hand.
// Safe for concurrent use on different envelopes.
func (s *stageRunner) process(ctx, workCtx context.Context, f *fetched, dst []output) ([]output, error) {
	if f.skip {
		return dst, nil // a type the stage does not handle: finished
	}
	m, env := f.m, f.env
	if err := f.decodeErr; err != nil {
		if derr := s.deadLetter(workCtx, m, nil, Permanent(fmt.Errorf("decode envelope: %w", err)), 0); derr != nil {
			return dst, derr
		}
		return dst, nil
	}
	attempts, waits := 0, 0
	for retries := 0; ; {
		timed := s.calls.Add(1)%handleSample == 1
		var start time.Time
		if timed {
			start = time.Now()
		}
		outs, err := s.call(workCtx, env)
		if timed {
			s.handleSeconds.ObserveSince(start)
		}
		attempts++
		var routed []output
		if err == nil {
			routed, err = s.route(env, outs, dst)
		}
		if err == nil {
			s.processed.Inc()
			return routed, nil
		}
		s.failed.Inc()
		if workCtx.Err() != nil {
			return dst, errAbandoned // drain deadline passed mid-Handle
		}
		breakerOpen := errors.Is(err, ErrBreakerOpen) && !IsPermanent(err)
		unavailable := breakerOpen || (IsUnavailable(err) && !IsPermanent(err))
		if IsPermanent(err) || (!unavailable && retries >= s.cfg.MaxRetries) {
			if derr := s.deadLetter(workCtx, m, &env, err, attempts); derr != nil {
				return dst, derr
			}
			return dst, nil
		}
		var wait time.Duration
		if breakerOpen {
			// The sink is known to be down: wait for it without using up
			// this envelope's retries.
			wait = s.cfg.BackoffMax
		} else if unavailable {
			// A dependency is down (Unavailable): back off as for a
			// retry, without using up this envelope's retries.
			wait = backoff(waits, s.cfg.BackoffBase, s.cfg.BackoffMax)
			waits++
		} else {
			wait = backoff(retries, s.cfg.BackoffBase, s.cfg.BackoffMax)
			retries++
			env.Attempt++
		}
		s.retried.Inc()
		s.log.Warn("handle failed; retrying", "id", env.ID, "attempt", env.Attempt, "err", err, "retryIn", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return dst, errAbandoned
		}
	}
}

// call runs Handle, turning a panic into a permanent error.
func (s *stageRunner) call(ctx context.Context, env schemas.Envelope) (outs []schemas.Envelope, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("stage panicked", "id", env.ID, "panic", v, "stack", string(debug.Stack()))
			err = Permanent(fmt.Errorf("stage %s panicked: %v", s.reg.Name, v))
		}
	}()
	return s.stage.Handle(ctx, env)
}

// route appends Handle's outputs to dst, paired with their topics, filling
// in ids, causation and trace context from the input. It fails, appending
// nothing, when one is misrouted.
func (s *stageRunner) route(in schemas.Envelope, outs []schemas.Envelope, dst []output) ([]output, error) {
	if len(outs) == 0 {
		return dst, nil
	}
	topics := make([]string, len(outs))
	for i := range outs {
		var t string
		switch {
		case s.reg.Route != nil:
			t = s.reg.Route(outs[i])
		case len(s.reg.Produces) > 0:
			t = s.reg.Produces[0]
		}
		if t == "" || !slices.Contains(s.reg.Produces, t) {
			return dst, Permanent(fmt.Errorf("stage %s: output %d (%s) routed to %q, not one of its Produces %v", s.reg.Name, i, outs[i].Type, t, s.reg.Produces))
		}
		topics[i] = t
	}
	for i, out := range outs {
		if out.ID == "" {
			out.ID = schemas.ChildID(in.ID, out.Type, i)
		}
		if out.CausationID == "" {
			out.CausationID = in.ID
		}
		if out.Traceparent == "" {
			out.Traceparent = in.Traceparent
		}
		if out.Workspace == "" {
			out.Workspace = in.Workspace
		}
		if out.OccurredAt.IsZero() {
			out.OccurredAt = time.Now().UTC()
		}
		dst = append(dst, output{topic: topics[i], env: out})
	}
	return dst, nil
}

// deadLetter publishes the failed envelope (or raw record) to the
// dead-letter topic, retrying while the publish fails retryably.
func (s *stageRunner) deadLetter(ctx context.Context, m message, env *schemas.Envelope, cause error, attempts int) error {
	dl := DeadLetter{
		Stage: s.reg.Name, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset,
		Error: cause.Error(), Permanent: IsPermanent(cause), Attempts: attempts,
		FailedAt: time.Now().UTC(), Envelope: env,
	}
	out := schemas.Envelope{Type: TypeDeadLettered, OccurredAt: dl.FailedAt}
	if env != nil {
		out.ID = schemas.ChildID(env.ID, "deadletter."+s.reg.Name, 0)
		out.Workspace, out.Key, out.CausationID, out.Traceparent = env.Workspace, env.Key, env.ID, env.Traceparent
	} else {
		dl.Raw = m.Value
		src := m.Topic + "/" + strconv.Itoa(m.Partition) + "/" + strconv.FormatInt(m.Offset, 10)
		out.ID = schemas.ChildID(src, "deadletter."+s.reg.Name, 0)
		out.Key = string(m.Key)
	}
	payload, err := json.Marshal(dl)
	if err != nil {
		return fmt.Errorf("dead-letter %s: encode: %w", out.ID, err)
	}
	out.Payload = payload
	s.log.Error("dead-lettering envelope", "id", out.CausationID, "offset", m.Offset, "partition", m.Partition, "attempts", attempts, "err", cause)
	if err := s.publish(ctx, Batch{Topic: schemas.TopicDeadLetter, Envs: []schemas.Envelope{out}}); err != nil {
		return fmt.Errorf("dead-letter %s: %w", out.ID, err)
	}
	s.deadLettered.Inc()
	return nil
}

// publish publishes batches in one call, retrying retryable failures with
// backoff (a retry publishes every batch again; consumers deduplicate by
// envelope id).
func (s *stageRunner) publish(ctx context.Context, batches ...Batch) error {
	for retries := 0; ; retries++ {
		err := PublishBatches(ctx, s.cfg.Resources.Publisher, batches...)
		if err == nil {
			return nil
		}
		if IsPermanent(err) || retries >= s.cfg.MaxRetries || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(backoff(retries, s.cfg.BackoffBase, s.cfg.BackoffMax)):
		case <-ctx.Done():
			return err
		}
	}
}
