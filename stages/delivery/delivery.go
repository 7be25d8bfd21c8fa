// Package delivery is the stage that hands transactional messages to the
// email provider: it reads transactional.send.v1 envelopes, renders them
// (Liquid, as accepted), builds the MIME message (with the marketing footer
// and RFC 8058 one-click unsubscribe headers under a marketing policy, DKIM
// signed when the sender's domain has a key), hands it to the provider
// plugin the send policy names, and records queued → sent, or → failed with
// the reason. Handle returns a transactional.status.v1 per change (routed
// to TopicMessageStatus, for the ClickHouse message log; never to the
// topic this stage reads) and TRANSACTIONAL_SENT or TRANSACTIONAL_FAILED
// (TopicWebhooks) when a webhook target of the workspace wants it; the
// runner publishes them before the envelope counts as finished. Other
// envelope types on the topic are skipped.
//
// The stage is pure and keyed (Spec.Concurrency): Handle runs for many
// messages at once, one at a time per message, and holds no queue of its
// own. Exactly once towards the provider: Handle claims the message in
// Postgres (claim_token; concurrent Handle calls share one statement)
// before it builds and sends it, and records the outcome (again a shared
// statement) before it returns. A redelivered envelope finds its message
// done and returns the outputs of the recorded outcome again (same ids);
// a provider failure before the relay could have taken the message
// releases the claim and returns an error the runner retries for as long
// as the provider is down (pipeline.Unavailable, or ErrBreakerOpen while
// its circuit breaker is open: those waits never dead-letter a message and
// do not count as attempts); an unknown outcome (the relay's answer lost)
// fails the message instead of risking a second copy, and a claim left by
// a worker that died mid hand-off fails it the same way once its lease
// ran out.
package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/email"
	"sendstream/sinks/email/render"
	_ "sendstream/sinks/email/smtp" // the SMTP provider plugin
	pgsink "sendstream/sinks/postgres"
	"sendstream/sinks/ttlcache"
	"sendstream/sinks/webhook"
)

// Name is the stage's registered name.
const Name = "delivery"

// Concurrency is how many messages the stage handles at once: each one
// waits on a claim, a render and the relay's answer (the SMTP provider
// bounds its own connections, 8 by default), and the claims and finishes
// of the Handle calls in progress share statements, so more of them in
// progress means fewer statements per message. Of these, only
// AdmitPerSend per provider connection hold a claim (admit.go); the rest
// wait unclaimed. MaxInFlight bounds the envelopes fetched and not
// finished (the old in-memory queue's size), enough to keep every
// connection busy.
const (
	Concurrency = 128
	MaxInFlight = 8192
)

func init() {
	pipeline.Register(pipeline.Spec[Config]{
		Name:        Name,
		Consumes:    schemas.TopicTransactional,
		Produces:    []string{schemas.TopicMessageStatus, schemas.TopicWebhooks},
		Route:       route,
		Defaults:    DefaultConfig(),
		Concurrency: Concurrency,
		MaxInFlight: MaxInFlight,
		// Handle decodes send payloads with schemas.DecodeSendPayloadCached,
		// which refuses whatever json.Valid refuses: the runner need not
		// check every payload first (one pass fewer over every message's
		// HTML). Envelopes of other types are skipped unread either way.
		UncheckedPayload: true,
		New: func(ctx context.Context, r pipeline.Resources, cfg Config) (pipeline.Stage, error) {
			cfg = cfg.FromSettings(r.Settings)
			return New(ctx, r, cfg)
		},
	})
}

// Stage is the delivery stage. Handle is called concurrently for
// different messages (see pipeline.Stage).
type Stage struct {
	cfg    Config
	pg     *pgxpool.Pool
	db     *store
	log    *slog.Logger
	engine *render.Engine
	// sources keeps the HTML and text sources of sends decoded: most sends
	// repeat one.
	sources *schemas.SourceCache

	provMu    sync.Mutex
	providers map[string]email.Provider
	admission map[string]chan struct{} // by provider name (admit.go)
	keys      keyCache
	// wants caches, per workspace and for webhook.TargetTTL, which of
	// TRANSACTIONAL_SENT and TRANSACTIONAL_FAILED a webhook target wants.
	wants *ttlcache.Cache[hooks]
}

var (
	_ pipeline.Stage  = (*Stage)(nil)
	_ pipeline.Closer = (*Stage)(nil)
)

// New builds the stage on r.Postgres (required; the stage opens a small
// pool of its own to that database). It starts nothing: the statement
// batchers start on first use.
func New(ctx context.Context, r pipeline.Resources, cfg Config) (*Stage, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r.Postgres == nil {
		return nil, errors.New("delivery: needs Postgres")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("delivery: build: %w", err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	// Its statements claim, finish and restore messages by id, in batches
	// passed as arrays: a pool of its own with lookup settings, so that a
	// generic plan made while transactional_messages was nearly empty does
	// not scan it whole for every batch later (the first minute on a fresh
	// database ran at a third of the rate).
	pg, err := pgsink.LookupPool(ctx, r.Postgres, 8, false)
	if err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	var tok [12]byte
	_, _ = rand.Read(tok[:])
	return &Stage{
		cfg: cfg, pg: pg, db: newStore(pg, hex.EncodeToString(tok[:]), cfg.ClaimLease, cfg.BatchMax),
		log: log.With("stage", Name), engine: render.Shared(cfg.Render),
		sources: schemas.NewSourceCache(32<<20, false), providers: map[string]email.Provider{},
		admission: map[string]chan struct{}{},
		keys:      keyCache{m: map[string]keyEntry{}, ttl: time.Minute},
		wants:     ttlcache.NewCache[hooks](webhook.TargetTTL),
	}, nil
}

// Close stops the statement batchers and closes the providers and the
// pool; the runner calls it after the last Handle.
func (s *Stage) Close() error {
	s.db.close()
	s.provMu.Lock()
	defer s.provMu.Unlock()
	for _, p := range s.providers {
		if c, ok := p.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	}
	s.pg.Close()
	return nil
}

// provider returns the provider plugin of a name, opened once.
func (s *Stage) provider(name string) (email.Provider, error) {
	name = providerName(name)
	s.provMu.Lock()
	defer s.provMu.Unlock()
	if p, ok := s.providers[name]; ok {
		return p, nil
	}
	p, err := email.Open(name, s.cfg.Providers[name])
	if err != nil {
		return nil, err
	}
	s.providers[name] = p
	return p, nil
}

// blocked reports whether the named provider's circuit breaker is open
// (false for a provider that cannot be opened: delivery fails the message).
func (s *Stage) blocked(name string) bool {
	prov, err := s.provider(name)
	if err != nil {
		return false
	}
	g, ok := prov.(email.Gate)
	return ok && g.Blocked()
}

// Handle delivers the message of one transactional.send.v1 envelope and
// returns its status and webhook envelopes; other types are skipped. A
// payload that does not decode is pipeline.Permanent. While the message's
// provider has its breaker open it returns an error wrapping
// pipeline.ErrBreakerOpen before claiming anything; Postgres or a provider
// being unavailable, or another worker holding the claim, is an error
// marked pipeline.Unavailable. See the package comment for the rest.
func (s *Stage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	if env.Type != schemas.TypeTransactionalSend {
		return nil, nil
	}
	p, err := schemas.DecodeSendPayloadCached(env.Payload, env.Workspace, s.sources)
	if err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("delivery: decode payload of %s: %w", env.ID, err))
	}
	if p.MessageID == "" {
		p.MessageID = env.ID
	}
	if !p.Spilled && s.blocked(p.Policy.Provider) {
		// Neither claimed (and released again) nor rendered while the
		// relay is known to be down.
		return nil, fmt.Errorf("delivery: provider %s: %w", providerName(p.Policy.Provider), pipeline.ErrBreakerOpen)
	}
	// Claimed only with an admission slot, held until the claim is given
	// back or the outcome recorded (admit.go). A spilled message's
	// provider is known only once it is loaded: it takes a slot of the
	// envelope's (the default).
	release, err := s.admit(ctx, p.Policy.Provider)
	if err != nil {
		return nil, err
	}
	defer release()
	c, err := s.db.claim(ctx, p.MessageID)
	if err != nil {
		return nil, pipeline.Unavailable(fmt.Errorf("delivery: %w", err))
	}
	if c.state == stateMissing {
		if p.Spilled {
			// The stored payload went with the row: nothing to send.
			s.log.Warn("spilled message has no row; dropped", "id", p.MessageID, "workspace", env.Workspace)
			return nil, nil
		}
		if err := s.db.restore(ctx, env, &p); err != nil {
			return nil, pipeline.Unavailable(fmt.Errorf("delivery: %w", err))
		}
		if c, err = s.db.claim(ctx, p.MessageID); err != nil {
			return nil, pipeline.Unavailable(fmt.Errorf("delivery: %w", err))
		}
		if c.state == stateMissing {
			// Its workspace is gone: restore stored nothing.
			s.log.Warn("message of a workspace that is gone; dropped", "id", p.MessageID, "workspace", env.Workspace)
			return nil, nil
		}
	}
	switch c.state {
	case stateDone:
		if p.Spilled {
			return nil, nil // its payload is gone; its outputs were returned when it finished
		}
		r, ok := doneResult(c)
		if !ok {
			return nil, nil
		}
		return s.announce(ctx, env, &p, r)
	case stateBusy:
		// Another worker is handing it off; its lease bounds the wait
		// (the claim turns stale after ClaimLease).
		return nil, pipeline.Unavailable(fmt.Errorf("delivery: message %s is being handed off by another worker", p.MessageID))
	case stateStale:
		if p.Spilled {
			return nil, nil
		}
		at := s.cfg.Now()
		if c.failedAt != nil {
			at = *c.failedAt
		}
		return s.announce(ctx, env, &p, result{status: schemas.MessageFailed, at: at,
			reason: "delivery outcome unknown: the worker handing it to the provider stopped; not retried to avoid sending twice"})
	}
	// Claimed: ours to hand off.
	if p.Spilled {
		stored, err := s.db.loadSpilled(ctx, p.MessageID)
		if errors.Is(err, errNoPayload) {
			// Claimed as queued, yet its payload is gone (deleted only
			// when a message is finished): nothing can be sent.
			return s.record(ctx, env, &p, result{status: schemas.MessageFailed, reason: "delivery failed: the stored message is missing"})
		}
		if err != nil {
			return nil, s.giveBack(ctx, p.MessageID, fmt.Errorf("delivery: %w", err))
		}
		if stored.MessageID == "" {
			stored.MessageID = p.MessageID
		}
		p = stored
	}
	r, err := s.deliver(ctx, env.Workspace, &p)
	if err != nil {
		return nil, s.giveBack(ctx, p.MessageID, err)
	}
	return s.record(ctx, env, &p, r)
}

// giveBack releases the claim of a message that was not handed off and
// returns cause for the runner to retry: as it is when it wraps
// pipeline.ErrBreakerOpen, marked pipeline.Unavailable otherwise. A release
// that fails leaves the claim to this stage's token, which claims it again
// on the retry.
func (s *Stage) giveBack(ctx context.Context, id string, cause error) error {
	if err := s.db.release(ctx, id); err != nil {
		s.log.Warn("release claim failed; the retry claims it again", "id", id, "err", err)
	}
	if errors.Is(cause, pipeline.ErrBreakerOpen) || ctx.Err() != nil {
		return cause
	}
	return pipeline.Unavailable(cause)
}

// record stores the outcome of a hand-off and returns its outputs. It
// retries the statement until it is recorded or ctx ends: returning an
// error after a hand-off would have the runner call Handle again, which
// would find the message still claimed by this stage and send it twice.
// When ctx ends first (the drain ran out), the claim stays and a later
// delivery fails the message as outcome unknown once the lease ran out.
func (s *Stage) record(ctx context.Context, env schemas.Envelope, p *schemas.SendPayload, r result) ([]schemas.Envelope, error) {
	for attempt := 0; ; attempt++ {
		f, err := s.db.finish(ctx, finishIn{id: p.MessageID, status: r.status, reason: r.reason, providerID: r.providerID,
			subject: r.subject, rendered: r.rendered})
		if err == nil {
			if !f.ok {
				return nil, nil // the claim was no longer ours: nothing recorded, nothing to say
			}
			r.at = f.at
			return s.announce(ctx, env, p, r)
		}
		wait := min(100*time.Millisecond<<min(attempt, 7), 10*time.Second)
		s.log.Warn("recording an outcome failed; retrying", "id", p.MessageID, "status", r.status, "err", err, "retryIn", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("delivery: record outcome of %s: %w", p.MessageID, ctx.Err())
		}
	}
}

// deliver builds, signs and hands off one claimed message. It returns the
// outcome to record, or an error when the message was not handed off and
// may be tried again (Postgres or the provider unavailable).
func (s *Stage) deliver(ctx context.Context, ws string, p *schemas.SendPayload) (result, error) {
	prov, err := s.provider(p.Policy.Provider)
	if err != nil {
		return result{status: schemas.MessageFailed, reason: "no provider: " + err.Error()}, nil
	}
	raw, rendered, err := s.build(ctx, ws, p)
	if err != nil {
		var perm permanentBuild
		if errors.As(err, &perm) {
			return result{status: schemas.MessageFailed, reason: err.Error()}, nil
		}
		return result{}, fmt.Errorf("delivery: build %s: %w", p.MessageID, err)
	}
	rcpts := append([]string{p.To}, p.Cc...)
	rcpts = append(rcpts, p.Bcc...)
	rec, err := prov.Send(ctx, &email.Message{ID: p.MessageID, From: p.From.Email, Recipients: rcpts, Raw: raw})
	r := result{status: schemas.MessageFailed, subject: rendered, rendered: true}
	switch {
	case err == nil:
		r.status, r.providerID, r.refused = schemas.MessageSent, rec.ProviderMessageID, rec.Refused
	case email.IsRefused(err):
		r.reason = "provider refused the message: " + strings.TrimPrefix(err.Error(), "refused: ")
	case email.IsUnknownOutcome(err):
		r.reason = "delivery outcome unknown (" + err.Error() + "); not retried to avoid sending twice"
	default:
		return result{}, fmt.Errorf("delivery: provider %s unavailable for %s: %w", prov.Name(), p.MessageID, err)
	}
	return r, nil
}
