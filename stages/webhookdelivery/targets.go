package webhookdelivery

import (
	"context"
	"errors"
	"time"

	"sendstream/schemas"
	"sendstream/sinks/webhook"
)

// This file holds what the stage reads and writes of its targets: their
// lookups (cached for Config.LookupTTL), and the run of failures that
// disables a dashboard endpoint.

// Targets reads and retires the targets of one kind. Safe for concurrent
// use. webhook.RESTHooks implements it for REST hooks,
// webhook.EndpointStore for dashboard endpoints.
type Targets interface {
	// Lookup returns the target's current URL and secrets; ok false when
	// it is gone or disabled (the delivery is skipped).
	Lookup(ctx context.Context, ws, id string) (h webhook.Hook, ok bool, err error)
	// Retire disables or deletes the target: its receiver answered 410.
	Retire(ctx context.Context, ws, id string) error
}

// FailureTracker is implemented by Targets whose targets are disabled
// after failing for long (dashboard endpoints: more than DisableAfter,
// spec 6; REST hooks are never disabled). Safe for concurrent use.
type FailureTracker interface {
	// MarkFailing records a failed attempt at at and returns when the
	// current run of failures began.
	MarkFailing(ctx context.Context, ws, id string, at time.Time) (since time.Time, err error)
	// ClearFailing ends the run of failures (an attempt succeeded).
	ClearFailing(ctx context.Context, ws, id string) error
	// Disable disables the target with reason.
	Disable(ctx context.Context, ws, id, reason string) (webhook.Endpoint, error)
}

// DisableAfter is how long a dashboard endpoint may keep failing before it
// is disabled until re-enabled (spec 6).
const DisableAfter = 12 * time.Hour

// lookup reads a target through the stage's cache (Config.LookupTTL).
func (s *Stage) lookup(ctx context.Context, targets Targets, kind, ws, id string) (webhook.Hook, bool, error) {
	if s.lookups == nil {
		return targets.Lookup(ctx, ws, id)
	}
	r, err := s.lookups.Get(ctx, kind+"\x00"+ws+"\x00"+id, func(ctx context.Context) (found, error) {
		h, ok, err := targets.Lookup(ctx, ws, id)
		return found{h, ok}, err
	})
	return r.hook, r.ok, err
}

// found is a cached lookup.
type found struct {
	hook webhook.Hook
	ok   bool
}

// forget drops a target from the lookup cache: this process retired,
// disabled or marked it failing.
func (s *Stage) forget(kind, ws, id string) {
	if s.lookups != nil {
		s.lookups.Forget(kind + "\x00" + ws + "\x00" + id)
	}
}

// track records an attempt's result with a target that is disabled after
// failing for DisableAfter, and disables it (reporting true) when this
// failure ends such a run. A success writes only when the target is known
// to be failing (its lookup said so, or this call marked it).
func (s *Stage) track(ctx context.Context, ft FailureTracker, h *handling, a schemas.WebhookAttempt) (bool, error) {
	ws, id := h.env.Workspace, h.d.TargetID
	if a.Outcome == schemas.WebhookOutcomeOK {
		if !h.hook.Failing {
			return false, nil
		}
		if err := ft.ClearFailing(ctx, ws, id); err != nil {
			return false, err
		}
		h.hook.Failing = false
		s.forget(h.d.TargetKind, ws, id)
		return false, nil
	}
	since, err := ft.MarkFailing(ctx, ws, id, a.At)
	if errors.Is(err, webhook.ErrEndpointNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !h.hook.Failing {
		h.hook.Failing = true
		s.forget(h.d.TargetKind, ws, id)
	}
	if a.At.Sub(since) <= DisableAfter {
		return false, nil
	}
	if _, err := ft.Disable(ctx, ws, id, webhook.DisabledFailing); err != nil && !errors.Is(err, webhook.ErrEndpointNotFound) {
		return false, err
	}
	s.forget(h.d.TargetKind, ws, id)
	return true, nil
}
