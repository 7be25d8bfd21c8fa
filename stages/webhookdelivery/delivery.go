// Package webhookdelivery sends outgoing webhooks (spec 2.5, 2.6, 6; issue
// 25): it reads schemas.TypeWebhookDelivery envelopes (published by
// stages/webhookfanout, keyed "<workspace>:<targetId>/<messageId>"), POSTs
// the body to the target through the SSRF guard of sinks/webhook (every
// dialled address checked, redirects not followed, 10-second time-out),
// signed when the target has secrets, and returns one
// schemas.TypeWebhookAttempt per attempt for the delivery log.
//
// Keyed concurrency (Spec.Concurrency) runs many deliveries at once, one
// message's attempts to one target in order. A target holds at most
// Config.PerTarget calls (DefaultPerTarget, 16) in a process; a delivery
// finding them all busy is deferred: a River job publishes it again a few
// seconds later with the same attempt number, so a receiver that hangs
// holds neither its partitions nor the runner's in-flight budget. The
// first QuickAttempts attempts run inside Handle, 1 s then 2 s apart; a
// 429 is tried again without counting an attempt (Retry-After honoured
// within the schedule's bounds); a 410 retires the target (a REST hook is
// deleted).
//
// Every attempt is claimed in Postgres before it is sent (claims.go): an
// envelope handled again after a crash resumes after the last claimed
// attempt, so no attempt number is sent twice; an attempt whose outcome is
// unknown counts as failed. The later attempts of the schedule (+5 min …
// +10 h), and a 429 whose wait is longer than the quick phase's, are
// durable River jobs in Postgres (Scheduler, retries.go) that publish the
// delivery again with the next attempt number when due; the attempt that
// hands over is logged with outcome "retry" (or "throttled") and
// NextAttemptAt.
//
// A dashboard endpoint failing for more than DisableAfter (12 h) is
// disabled until re-enabled (FailureTracker); REST hooks never are.
// Targets are looked up through a cache of webhook.TargetTTL (1 s).
package webhookdelivery

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/valyala/fasthttp"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/ttlcache"
	"sendstream/sinks/webhook"
)

// Name is the stage's name.
const Name = "webhookdelivery"

// Config configures the stage.
type Config struct {
	// AllowPrivate: Settings["webhook_allow_private"] (comma-separated
	// CIDRs; local development and tests only).
	AllowPrivate []netip.Prefix
	// InsecureTLS: Settings["webhook_insecure_tls"] (local development only).
	InsecureTLS bool
	// Timeout bounds one attempt (default webhook.DefaultTimeout, 10 s).
	Timeout time.Duration
	// UserAgent names the service (default "Sendstream-Webhooks/1.0").
	UserAgent string
	// Guard, when set, replaces the guard built from AllowPrivate (tests
	// with their own resolver).
	Guard *webhook.Guard
	// Now is the clock (default time.Now).
	Now func() time.Time
	// PerTarget bounds one target's Handle calls in this process (default
	// DefaultPerTarget); a delivery finding them all busy is deferred
	// (needs a Scheduler; without one there is no bound).
	PerTarget int
	// Deferral is the shortest wait of a deferred delivery (default
	// DefaultDeferral).
	Deferral time.Duration
	// LookupTTL is how long a target's lookup is reused (default
	// webhook.TargetTTL; negative: not cached).
	LookupTTL time.Duration
}

// FromSettings applies the process settings webhook_allow_private and
// webhook_insecure_tls (the values of SENDSTREAM_WEBHOOK_ALLOW_PRIVATE and
// SENDSTREAM_WEBHOOK_INSECURE_TLS that config.go read).
func (c Config) FromSettings(s map[string]string) (Config, error) {
	o, err := webhook.ParseOutbound(s["webhook_allow_private"], s["webhook_insecure_tls"])
	if err != nil {
		return c, fmt.Errorf("%s settings: %w", Name, err)
	}
	c.AllowPrivate, c.InsecureTLS = o.AllowPrivate, o.InsecureTLS
	return c, nil
}

func init() {
	pipeline.Register(pipeline.Spec[Config]{
		Name: Name, Consumes: schemas.TopicWebhookDeliveries, Produces: []string{schemas.TopicWebhookAttempts},
		// One Handle per message and target at a time (the fan-out's
		// keys); up to this many at once, each possibly waiting on a slow
		// receiver or a quick retry, at most PerTarget of them per target.
		Concurrency: 512,
		New: func(ctx context.Context, r pipeline.Resources, cfg Config) (pipeline.Stage, error) {
			if r.Postgres == nil {
				return nil, fmt.Errorf("%s: needs Postgres", Name)
			}
			cfg, err := cfg.FromSettings(r.Settings)
			if err != nil {
				return nil, err
			}
			if r.Publisher == nil {
				return nil, fmt.Errorf("%s: needs a Publisher (scheduled retries)", Name)
			}
			sched, err := StartScheduler(ctx, r.Postgres, r.Publisher, SchedulerConfig{Queue: QueueFor(r.Settings["topic_prefix"]), Logger: r.Logger})
			if err != nil {
				return nil, err
			}
			eps, err := webhook.NewEndpointStore(r.Postgres, webhook.EndpointStoreConfig{Secret: r.Settings["secret"], Now: cfg.Now})
			if err != nil {
				_ = sched.Close()
				return nil, fmt.Errorf("%s: %w", Name, err)
			}
			rest := webhook.NewRESTHooks(r.Postgres)
			return New(cfg, map[string]Targets{rest.Kind(): rest, eps.Kind(): eps}, sched), nil
		},
	})
}

// Stage is the delivery stage. Handle is safe for concurrent use.
type Stage struct {
	cfg     Config
	client  *fasthttp.Client
	targets map[string]Targets
	sched   *Scheduler
	limit   *limiter
	lookups *ttlcache.Cache[found] // nil: not cached
}

// New returns the stage; targets maps each target kind
// (schemas.WebhookTarget…) to where its targets are read; sched keeps the
// later attempts (nil: they are logged with NextAttemptAt and not made;
// tests only; so are the claims of attempts and the per-target bound).
// Close closes sched.
func New(cfg Config, targets map[string]Targets, sched *Scheduler) *Stage {
	if cfg.Timeout <= 0 {
		cfg.Timeout = webhook.DefaultTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "Sendstream-Webhooks/1.0"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PerTarget <= 0 {
		cfg.PerTarget = DefaultPerTarget
	}
	if cfg.Deferral <= 0 {
		cfg.Deferral = DefaultDeferral
	}
	if cfg.LookupTTL == 0 {
		cfg.LookupTTL = webhook.TargetTTL
	}
	var lookups *ttlcache.Cache[found]
	if cfg.LookupTTL > 0 {
		lookups = ttlcache.NewCache[found](cfg.LookupTTL)
		lookups.Now = cfg.Now
	}
	g := cfg.Guard
	if g == nil {
		g = webhook.NewGuard(webhook.GuardConfig{AllowPrivate: cfg.AllowPrivate})
	}
	return &Stage{cfg: cfg, targets: targets, sched: sched, limit: newLimiter(cfg.PerTarget), lookups: lookups,
		client: g.Client(webhook.ClientConfig{InsecureTLS: cfg.InsecureTLS, Timeout: cfg.Timeout, UserAgent: cfg.UserAgent})}
}

// Handle delivers one envelope: up to QuickAttempts attempts (and the 429
// retries between them), returning an attempt envelope for each. The call
// takes one of its target's PerTarget slots (none free: the delivery is
// deferred, see defer_), and each attempt is claimed in Postgres before it
// is sent (claims.go): an envelope handled again resumes after the last
// claimed attempt. An error reading or retiring the target is retried by
// the runner (Unavailable); a malformed envelope is Permanent.
func (s *Stage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	// The runner checked that the payload is valid JSON: the body is
	// kept as it is, not decoded or checked again.
	d, err := schemas.DecodeWebhookDelivery(env.Payload)
	if err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("webhook delivery %s: %w", env.ID, err))
	}
	if d.Attempt < 1 || d.MessageID == "" || d.TargetID == "" {
		return nil, pipeline.Permanent(fmt.Errorf("webhook delivery %s: attempt %d, message %q, target %q", env.ID, d.Attempt, d.MessageID, d.TargetID))
	}
	targets, ok := s.targets[d.TargetKind]
	if !ok {
		return nil, pipeline.Permanent(fmt.Errorf("webhook delivery %s: unknown target kind %q", env.ID, d.TargetKind))
	}
	hook, ok, err := s.lookup(ctx, targets, d.TargetKind, env.Workspace, d.TargetID)
	if err != nil {
		return nil, pipeline.Unavailable(fmt.Errorf("webhook delivery %s: %w", env.ID, err))
	}
	if !ok {
		a := s.attempt(env, d)
		a.Outcome = schemas.WebhookOutcomeSkipped
		return s.outputs(env, d, nil, a)
	}
	h := &handling{env: env, d: d, targets: targets, hook: hook, slot: env.Workspace + ":" + d.TargetID}
	if s.sched != nil {
		// The slot is held for the whole call, quick waits included, so a
		// target holds at most PerTarget of the stage's Handle calls.
		start := s.cfg.Now()
		if !s.limit.acquire(h.slot, start) {
			if err := s.defer_(ctx, h); err != nil {
				return nil, err
			}
			return h.result, nil
		}
		defer func() { s.limit.release(h.slot, start, s.cfg.Now()) }()
	}
	for {
		done, err := s.step(ctx, h)
		if err != nil || done {
			if err != nil {
				return nil, err
			}
			return h.result, nil
		}
		t := time.NewTimer(h.wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("webhook delivery %s: %w", env.ID, ctx.Err())
		case <-t.C:
		}
	}
}

// handling is the state of one Handle call between its attempts.
type handling struct {
	env     schemas.Envelope
	d       schemas.WebhookDelivery // the next attempt to make
	targets Targets
	hook    webhook.Hook
	slot    string // the per-target bound's key
	out     []schemas.WebhookAttempt
	// claimed is the claim of the latest attempt made here (nil: none).
	claimed *claimIn
	// throttledHere counts the 429s waited out in this call.
	throttledHere int
	wait          time.Duration // before the next step
	result        []schemas.Envelope
}

// step makes h's next attempt, or defers it, or finds it already made;
// done reports that Handle returns h.result, else it waits h.wait and
// steps again.
func (s *Stage) step(ctx context.Context, h *handling) (done bool, err error) {
	env, targets := h.env, h.targets
	ck := claimIn{delivery: h.d.MessageID + "/" + h.d.TargetID, attempt: h.d.Attempt, throttled: h.d.Throttled, replay: h.d.Replay}
	if s.sched != nil {
		got, err := s.sched.claims.take(ctx, ck)
		if err != nil {
			return false, pipeline.Unavailable(fmt.Errorf("webhook delivery %s: %w", env.ID, err))
		}
		if !got.ok {
			return s.resume(ctx, h, got)
		}
		h.claimed = &ck
	}
	d := &h.d
	now := s.cfg.Now()
	res := webhook.Send(ctx, s.client, s.cfg.Timeout, webhook.Request{URL: h.hook.URL, Event: d.Event, Attempt: d.Attempt,
		MessageID: d.MessageID, Body: d.Body, Secrets: h.hook.Secrets}, now)
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("webhook delivery %s: %w", env.ID, err)
	}
	a := s.attempt(env, *d)
	a.URL, a.At, a.StatusCode, a.DurationMs, a.Error = h.hook.URL, now.UTC(), res.StatusCode, float64(res.Duration.Microseconds())/1000, res.Err
	var wait time.Duration
	var later *time.Time // when the durable schedule takes over
	var laterThrottled bool
	switch {
	case res.OK():
		a.Outcome = schemas.WebhookOutcomeOK
	case res.StatusCode == 410:
		if err := targets.Retire(ctx, env.Workspace, d.TargetID); err != nil {
			return false, pipeline.Unavailable(fmt.Errorf("webhook delivery %s: %w", env.ID, err))
		}
		s.forget(d.TargetKind, env.Workspace, d.TargetID)
		a.Outcome = schemas.WebhookOutcomeRetired
	case res.StatusCode == 429:
		// Not an attempt: the same attempt number is tried again.
		d.Throttled++
		h.throttledHere++
		a.Outcome, a.Throttled = schemas.WebhookOutcomeThrottled, d.Throttled
		w := throttleWait(d.Attempt, res.RetryAfter)
		next := now.Add(w).UTC()
		a.NextAttemptAt = &next
		if w <= Schedule[QuickAttempts-2] && h.throttledHere <= QuickAttempts {
			wait = w
		} else {
			later, laterThrottled = &next, true
		}
	default:
		w, more := After(d.Attempt)
		if !more {
			a.Outcome = schemas.WebhookOutcomeFailed
			break
		}
		next := now.Add(w).UTC()
		a.Outcome, a.NextAttemptAt = schemas.WebhookOutcomeRetry, &next
		if d.Attempt < QuickAttempts {
			wait = w
		} else {
			later = &next
		}
		d.Attempt++
	}
	if ft, ok := targets.(FailureTracker); ok && a.Outcome != schemas.WebhookOutcomeThrottled && a.Outcome != schemas.WebhookOutcomeRetired {
		disabled, err := s.track(ctx, ft, h, a)
		if err != nil {
			return false, pipeline.Unavailable(fmt.Errorf("webhook delivery %s: %w", env.ID, err))
		}
		if disabled {
			a.Outcome, a.NextAttemptAt, wait, later = schemas.WebhookOutcomeRetired, nil, 0, nil
			a.Error = webhook.Bound(a.Error + "; endpoint disabled: " + webhook.DisabledFailing)
		}
	}
	h.out = append(h.out, a)
	if wait > 0 {
		h.wait = wait
		return false, nil
	}
	state := claimDone
	if later != nil && s.sched != nil {
		next, err := nextEnvelope(env, *d, laterThrottled, *later)
		if err != nil {
			return false, pipeline.Permanent(err)
		}
		if err := s.sched.Schedule(ctx, next, *later); err != nil {
			return false, pipeline.Unavailable(fmt.Errorf("webhook delivery %s: %w", env.ID, err))
		}
		state = claimSettled
	}
	return true, s.finish(ctx, h, state, nil)
}

// finish sets h.result to the attempt rows of h (and stored, rows an
// earlier Handle of the delivery returned) and records them with the
// claim of h's latest attempt in state.
func (s *Stage) finish(ctx context.Context, h *handling, state string, stored []schemas.Envelope) error {
	out, err := s.outputs(h.env, h.d, h.out, schemas.WebhookAttempt{})
	if err != nil {
		return err
	}
	out = append(out, stored...)
	if h.claimed != nil {
		if err := s.sched.claims.settle(ctx, *h.claimed, state, out); err != nil {
			return pipeline.Unavailable(fmt.Errorf("webhook delivery %s: %w", h.env.ID, err))
		}
	}
	h.result = out
	return nil
}

// resume handles an attempt whose claim another Handle holds: a delivery
// already settled or done returns what it returned (with this call's own
// attempts), and an attempt claimed but never settled, whose outcome is
// unknown (the process died during it), counts as failed: it is logged
// with that error, and the schedule goes on from it.
func (s *Stage) resume(ctx context.Context, h *handling, got held) (bool, error) {
	if got.state != claimSending {
		return true, s.finish(ctx, h, got.state, got.outputs)
	}
	d := &h.d
	d.Attempt, d.Throttled = got.attempt, got.throttled
	a := s.attempt(h.env, *d)
	a.Error = "outcome unknown: the attempt was claimed and never settled (the process handling it stopped); counted as failed"
	now := s.cfg.Now()
	w, more := After(d.Attempt)
	a.Outcome = schemas.WebhookOutcomeFailed
	if more {
		next := now.Add(w).UTC()
		a.Outcome, a.NextAttemptAt = schemas.WebhookOutcomeRetry, &next
	}
	h.out = append(h.out, a)
	// The interrupted claim is settled by this call.
	h.claimed = &claimIn{delivery: d.MessageID + "/" + d.TargetID, attempt: got.attempt, throttled: got.throttled}
	if !more {
		return true, s.finish(ctx, h, claimDone, nil)
	}
	d.Attempt, d.Throttled = d.Attempt+1, 0
	if d.Attempt <= QuickAttempts {
		h.wait = w
		return false, nil
	}
	next, err := nextEnvelope(h.env, *d, false, *a.NextAttemptAt)
	if err != nil {
		return false, pipeline.Permanent(err)
	}
	if err := s.sched.Schedule(ctx, next, *a.NextAttemptAt); err != nil {
		return false, pipeline.Unavailable(fmt.Errorf("webhook delivery %s: %w", h.env.ID, err))
	}
	return true, s.finish(ctx, h, claimSettled, nil)
}

// defer_ hands h's delivery back to the schedule without an attempt: its
// target's PerTarget slots are all held in this process. The
// same delivery (attempt and throttle count unchanged) is published again
// by a River job after at least Config.Deferral, spaced from the target's
// other deferrals (limiter.deferUntil), so neither the partition nor the
// runner's in-flight budget waits for a slow target. Not an attempt: no
// delivery-log row, the sendstream_webhook_deferrals_total counter.
func (s *Stage) defer_(ctx context.Context, h *handling) error {
	at := s.limit.deferUntil(h.slot, s.cfg.Now(), s.cfg.Deferral)
	next, err := deferredEnvelope(h.env, h.d, at)
	if err != nil {
		return pipeline.Permanent(err)
	}
	if err := s.sched.Schedule(ctx, next, at); err != nil {
		return pipeline.Unavailable(fmt.Errorf("webhook delivery %s: %w", h.env.ID, err))
	}
	return s.finish(ctx, h, claimSettled, nil)
}

// attempt returns the delivery-log row of d's current attempt, without
// its result.
func (s *Stage) attempt(env schemas.Envelope, d schemas.WebhookDelivery) schemas.WebhookAttempt {
	return schemas.WebhookAttempt{MessageID: d.MessageID, Event: d.Event, TargetKind: d.TargetKind, TargetID: d.TargetID,
		URL: d.URL, Attempt: d.Attempt, At: s.cfg.Now().UTC(), Replay: d.Replay}
}

// outputs wraps the attempts (and extra, when it has an outcome) as
// TypeWebhookAttempt envelopes. Ids are ChildID(MessageID+"/"+TargetID,
// TypeWebhookAttempt, Attempt) for counted attempts and, for a 429, the
// same with "/throttled" after the target and the throttle count as the
// index; a replay adds "/replay/<envelope id>" so its rows are its own.
func (s *Stage) outputs(env schemas.Envelope, d schemas.WebhookDelivery, as []schemas.WebhookAttempt, extra schemas.WebhookAttempt) ([]schemas.Envelope, error) {
	if extra.Outcome != "" {
		as = append(as, extra)
	}
	base := d.MessageID + "/" + d.TargetID
	if d.Replay {
		base += "/replay/" + env.ID
	}
	out := make([]schemas.Envelope, 0, len(as))
	for _, a := range as {
		id := schemas.ChildID(base, schemas.TypeWebhookAttempt, a.Attempt)
		if a.Outcome == schemas.WebhookOutcomeThrottled {
			id = schemas.ChildID(base+"/throttled", schemas.TypeWebhookAttempt, a.Throttled)
		}
		p, err := schemas.AppendWebhookAttempt(make([]byte, 0, 320+len(a.Error)), &a)
		if err != nil {
			return nil, pipeline.Permanent(fmt.Errorf("webhook attempt of %s: %w", env.ID, err))
		}
		out = append(out, schemas.Envelope{ID: id, Workspace: env.Workspace, Type: schemas.TypeWebhookAttempt,
			Key: env.Key, OccurredAt: a.At, CausationID: env.ID, Traceparent: env.Traceparent, Payload: p,
			// AppendWebhookAttempt writes json.Marshal's bytes: compact
			// and valid, copied by AppendEnvelope without another check.
			PayloadCompact: true})
	}
	return out, nil
}

// Close stops the scheduler of later attempts.
func (s *Stage) Close() error {
	if s.sched == nil {
		return nil
	}
	return s.sched.Close()
}

var (
	_ pipeline.Stage  = (*Stage)(nil)
	_ pipeline.Closer = (*Stage)(nil)
)
