// Package webhookdelivery sends outgoing webhooks (spec 2.5, 2.6, 6; issue
// 25): it reads schemas.TypeWebhookDelivery envelopes (published by
// stages/webhookfanout, keyed "<workspace>:<targetId>"), POSTs the body to
// the target through the SSRF guard of sinks/webhook (every dialled
// address checked, redirects not followed, 10-second time-out), signed
// when the target has secrets, and returns one schemas.TypeWebhookAttempt
// per attempt for the delivery log.
//
// Keyed concurrency (Spec.Concurrency) runs many targets at once and one
// target's deliveries in order, so a receiver that hangs holds only its
// own key. The first QuickAttempts attempts run inside Handle, 1 s then
// 2 s apart; a 429 is tried again without counting an attempt (Retry-After
// honoured within the schedule's bounds); a 410 retires the target (a REST
// hook is deleted).
//
// The later attempts of the schedule (+5 min … +10 h), and a 429 whose
// wait is longer than the quick phase's, are durable River jobs in
// Postgres (Scheduler, retries.go) that publish the delivery again with
// the next attempt number when due; the attempt that hands over is logged
// with outcome "retry" (or "throttled") and NextAttemptAt.
//
// A dashboard endpoint failing for more than DisableAfter (12 h) is
// disabled until re-enabled (FailureTracker); REST hooks never are.
//
// Not yet here (issue 25): River promotes due jobs on the real clock (the
// schedule's due times are tested from the jobs), and no kill -9 test.
package webhookdelivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/valyala/fasthttp"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
)

// Name is the stage's name.
const Name = "webhookdelivery"

// Targets reads and retires the targets of one kind. Safe for concurrent
// use. webhook.RESTHooks implements it for REST hooks; dashboard endpoints
// plug in with their own implementation.
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
		// One Handle per target at a time; up to this many targets at once,
		// each possibly waiting on a slow receiver or a quick retry.
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
			sched, err := StartScheduler(ctx, r.Postgres, r.Publisher, SchedulerConfig{Logger: r.Logger})
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
}

// New returns the stage; targets maps each target kind
// (schemas.WebhookTarget…) to where its targets are read; sched keeps the
// later attempts (nil: they are logged with NextAttemptAt and not made;
// tests only). Close closes sched.
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
	g := cfg.Guard
	if g == nil {
		g = webhook.NewGuard(webhook.GuardConfig{AllowPrivate: cfg.AllowPrivate})
	}
	return &Stage{cfg: cfg, targets: targets, sched: sched,
		client: g.Client(webhook.ClientConfig{InsecureTLS: cfg.InsecureTLS, Timeout: cfg.Timeout, UserAgent: cfg.UserAgent})}
}

// Handle delivers one envelope: up to QuickAttempts attempts (and the 429
// retries between them), returning an attempt envelope for each. An error
// reading or retiring the target is retried by the runner (Unavailable);
// a malformed envelope is Permanent.
func (s *Stage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	var d schemas.WebhookDelivery
	if err := json.Unmarshal(env.Payload, &d); err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("webhook delivery %s: %w", env.ID, err))
	}
	if d.Attempt < 1 || d.MessageID == "" || d.TargetID == "" {
		return nil, pipeline.Permanent(fmt.Errorf("webhook delivery %s: attempt %d, message %q, target %q", env.ID, d.Attempt, d.MessageID, d.TargetID))
	}
	targets, ok := s.targets[d.TargetKind]
	if !ok {
		return nil, pipeline.Permanent(fmt.Errorf("webhook delivery %s: unknown target kind %q", env.ID, d.TargetKind))
	}
	hook, ok, err := targets.Lookup(ctx, env.Workspace, d.TargetID)
	if err != nil {
		return nil, pipeline.Unavailable(fmt.Errorf("webhook delivery %s: %w", env.ID, err))
	}
	a := s.attempt(env, d)
	if !ok {
		a.Outcome = schemas.WebhookOutcomeSkipped
		return s.outputs(env, d, nil, a)
	}
	var out []schemas.WebhookAttempt
	throttledHere := 0
	var later *time.Time // when the durable schedule takes over
	var laterThrottled bool
	for {
		now := s.cfg.Now()
		res := webhook.Send(ctx, s.client, s.cfg.Timeout, webhook.Request{URL: hook.URL, Event: d.Event, Attempt: d.Attempt,
			MessageID: d.MessageID, Body: d.Body, Secrets: hook.Secrets}, now)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("webhook delivery %s: %w", env.ID, err)
		}
		a := s.attempt(env, d)
		a.URL, a.At, a.StatusCode, a.DurationMs, a.Error = hook.URL, now.UTC(), res.StatusCode, float64(res.Duration.Microseconds())/1000, res.Err
		var wait time.Duration
		switch {
		case res.OK():
			a.Outcome = schemas.WebhookOutcomeOK
		case res.StatusCode == 410:
			if err := targets.Retire(ctx, env.Workspace, d.TargetID); err != nil {
				return nil, pipeline.Unavailable(fmt.Errorf("webhook delivery %s: %w", env.ID, err))
			}
			a.Outcome = schemas.WebhookOutcomeRetired
		case res.StatusCode == 429:
			// Not an attempt: the same attempt number is tried again.
			d.Throttled++
			throttledHere++
			a.Outcome, a.Throttled = schemas.WebhookOutcomeThrottled, d.Throttled
			w := throttleWait(d.Attempt, res.RetryAfter)
			next := now.Add(w).UTC()
			a.NextAttemptAt = &next
			if w <= Schedule[QuickAttempts-2] && throttledHere <= QuickAttempts {
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
			disabled, err := s.track(ctx, ft, env.Workspace, d.TargetID, a)
			if err != nil {
				return nil, pipeline.Unavailable(fmt.Errorf("webhook delivery %s: %w", env.ID, err))
			}
			if disabled {
				a.Outcome, a.NextAttemptAt, wait, later = schemas.WebhookOutcomeRetired, nil, 0, nil
				a.Error = webhook.Bound(a.Error + "; endpoint disabled: " + webhook.DisabledFailing)
			}
		}
		out = append(out, a)
		if wait == 0 {
			if later != nil && s.sched != nil {
				next, err := nextEnvelope(env, d, laterThrottled, *later)
				if err != nil {
					return nil, pipeline.Permanent(err)
				}
				if err := s.sched.Schedule(ctx, next, *later); err != nil {
					return nil, pipeline.Unavailable(fmt.Errorf("webhook delivery %s: %w", env.ID, err))
				}
			}
			return s.outputs(env, d, out, schemas.WebhookAttempt{})
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("webhook delivery %s: %w", env.ID, ctx.Err())
		case <-t.C:
		}
	}
}

// track records an attempt's result with a target that is disabled after
// failing for DisableAfter, and disables it (reporting true) when this
// failure ends such a run.
func (s *Stage) track(ctx context.Context, ft FailureTracker, ws, id string, a schemas.WebhookAttempt) (bool, error) {
	if a.Outcome == schemas.WebhookOutcomeOK {
		return false, ft.ClearFailing(ctx, ws, id)
	}
	since, err := ft.MarkFailing(ctx, ws, id, a.At)
	if errors.Is(err, webhook.ErrEndpointNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if a.At.Sub(since) <= DisableAfter {
		return false, nil
	}
	if _, err := ft.Disable(ctx, ws, id, webhook.DisabledFailing); err != nil && !errors.Is(err, webhook.ErrEndpointNotFound) {
		return false, err
	}
	return true, nil
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
		p, err := json.Marshal(a)
		if err != nil {
			return nil, pipeline.Permanent(fmt.Errorf("webhook attempt of %s: %w", env.ID, err))
		}
		out = append(out, schemas.Envelope{ID: id, Workspace: env.Workspace, Type: schemas.TypeWebhookAttempt,
			Key: env.Key, OccurredAt: a.At, CausationID: env.ID, Traceparent: env.Traceparent, Payload: p})
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
