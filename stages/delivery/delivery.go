// Package delivery is the stage that hands transactional messages to the
// email provider: it reads transactional.send.v1 envelopes, renders them
// (Liquid, as accepted), builds the MIME message (with the marketing footer
// and RFC 8058 one-click unsubscribe headers under a marketing policy, DKIM
// signed when the sender's domain has a key), hands it to the provider
// plugin the send policy names, and records queued → sent, or → failed with
// the reason. It publishes TRANSACTIONAL_SENT (TopicWebhooks) and a
// transactional.status.v1 per change (TopicTransactional, for the ClickHouse
// message log). Other envelope types on the topic are skipped.
//
// Exactly once towards the provider: Handle only queues; dispatchers claim
// a batch of messages in Postgres (claim_token, one statement), hand the
// claimed ones to the provider concurrently, and record the outcomes in one
// statement. A redelivered envelope finds its message no longer queued (or
// claimed by this process) and is skipped; a provider failure before the
// relay could have taken the message releases the claim and retries, with
// the provider's circuit breaker pausing consumption while it is open; an
// unknown outcome (the relay's answer lost) fails the message instead of
// risking a second copy. Flush returns once every queued envelope is
// finished and its outputs published, so the runner commits only then.
package delivery

import (
	"context"
	"crypto"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/email"
	"sendstream/sinks/email/render"
	_ "sendstream/sinks/email/smtp" // the SMTP provider plugin
	pgsink "sendstream/sinks/postgres"
)

// Name is the stage's registered name.
const Name = "delivery"

var (
	//go:embed sql/claim.sql
	sqlClaim string
	//go:embed sql/claim_queued.sql
	sqlClaimQueued string
	//go:embed sql/finish.sql
	sqlFinish string
	//go:embed sql/release.sql
	sqlRelease string
	//go:embed sql/payloads.sql
	sqlPayloads string
	//go:embed sql/dkim_key.sql
	sqlDKIMKey string
	//go:embed sql/restore.sql
	sqlRestore string
)

func init() {
	pipeline.Register(pipeline.Spec[Config]{
		Name:     Name,
		Consumes: schemas.TopicTransactional,
		Produces: []string{schemas.TopicWebhooks, schemas.TopicTransactional},
		Route:    route,
		Defaults: DefaultConfig(),
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

// route files outputs: webhook envelopes to TopicWebhooks, status changes
// to TopicTransactional. (Outputs are published by the dispatchers; Handle
// returns none, but the declaration documents what the stage produces.)
func route(out schemas.Envelope) string {
	if out.Type == schemas.TypeTransactionalStatus {
		return schemas.TopicTransactional
	}
	return schemas.TopicWebhooks
}

// Config configures the stage. Start from DefaultConfig.
type Config struct {
	SiteURL string // Settings["site_url"]: unsubscribe links
	Secret  string // Settings["secret"]: signs unsubscribe links (as ingest does)
	// Providers are the settings of each provider plugin by name; "smtp"
	// gets {"url": Settings["smtp_url"]}.
	Providers map[string]map[string]string
	// Dispatchers claim and finish batches concurrently (default 4).
	Dispatchers int
	// Workers bound the hand-offs in flight across dispatchers (default 32;
	// the SMTP provider also bounds its connections).
	Workers int
	// BatchMax bounds the messages claimed per statement (default 256).
	BatchMax int
	// Queue bounds the envelopes waiting in memory (default 8192); Handle
	// waits for room.
	Queue int
	// ClaimLease is how long another worker's claim is honoured before its
	// message is failed as "outcome unknown" (default 60s; it must exceed
	// the provider's time-out).
	ClaimLease time.Duration
	// RetryMin and RetryMax bound the wait before a message whose provider
	// was unavailable is tried again (defaults 200ms and 10s).
	RetryMin, RetryMax time.Duration
	// Render bounds the render of each message (Settings
	// "render_max_iterations", "render_max_output_bytes", "render_timeout";
	// default render.DefaultBudget()). A message whose render exceeds it
	// fails with the budget as its reason ("template error: html: the
	// render exceeded its budget of …") and is not retried.
	Render render.Budget
	// FooterHTML and FooterText are the marketing compliance footer;
	// {{workspace}} and {{unsubscribe_url}} are replaced (defaults below).
	FooterHTML, FooterText string
	// Now is the clock (tests).
	Now func() time.Time
}

// Default marketing footers.
const (
	DefaultFooterHTML = `<div style="margin-top:32px;padding-top:12px;border-top:1px solid #ddd;font:12px/1.5 Arial,sans-serif;color:#666">You are receiving this email because you are subscribed to {{workspace}}. <a href="{{unsubscribe_url}}" style="color:#666">Unsubscribe</a></div>`
	DefaultFooterText = "\n\n--\nYou are receiving this email because you are subscribed to {{workspace}}.\nUnsubscribe: {{unsubscribe_url}}\n"
)

// DefaultConfig returns the configuration the registered stage starts from.
func DefaultConfig() Config {
	return Config{
		SiteURL: "http://127.0.0.1:8080", Dispatchers: 4, Workers: 32, BatchMax: 256, Queue: 8192,
		ClaimLease: time.Minute, RetryMin: 200 * time.Millisecond, RetryMax: 10 * time.Second,
		FooterHTML: DefaultFooterHTML, FooterText: DefaultFooterText,
		Providers: map[string]map[string]string{"smtp": {"url": "smtp://127.0.0.1:1025"}},
		Render:    render.DefaultBudget(),
	}
}

// FromSettings applies the process settings (site_url, secret, smtp_url,
// <provider>_url and the render budget's render_max_iterations,
// render_max_output_bytes and render_timeout; a value that does not parse
// becomes -1, which Validate refuses).
func (c Config) FromSettings(s map[string]string) Config {
	for k, dst := range map[string]*int64{"render_max_iterations": &c.Render.MaxIterations, "render_max_output_bytes": &c.Render.MaxOutputBytes} {
		if v := s[k]; v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				n = -1
			}
			*dst = n
		}
	}
	if v := s["render_timeout"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			d = -1
		}
		c.Render.Timeout = d
	}
	if v := s["site_url"]; v != "" {
		c.SiteURL = v
	}
	if v := s["secret"]; v != "" {
		c.Secret = v
	}
	p := map[string]map[string]string{}
	for k, v := range c.Providers {
		p[k] = v
	}
	for k, v := range s {
		if name, ok := strings.CutSuffix(k, "_url"); ok && name != "site" && v != "" {
			p[name] = map[string]string{"url": v}
		}
	}
	c.Providers = p
	return c
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Secret == "":
		return errors.New("delivery: no secret to sign unsubscribe links (Settings[\"secret\"])")
	case c.Dispatchers < 1 || c.Workers < 1 || c.BatchMax < 1 || c.Queue < 1:
		return errors.New("delivery: dispatchers, workers, batch size and queue must be positive")
	case c.ClaimLease < time.Second:
		return errors.New("delivery: claim lease under a second")
	case c.RetryMin <= 0 || c.RetryMax < c.RetryMin:
		return errors.New("delivery: bad retry bounds")
	}
	if err := c.Render.Validate(); err != nil {
		return fmt.Errorf("delivery: %w", err)
	}
	return nil
}

// Stage is the delivery stage. Handle and Flush are called from one
// goroutine (the runner); the dispatchers run on their own until Close.
type Stage struct {
	cfg    Config
	pg     *pgxpool.Pool
	pub    pipeline.Publisher
	log    *slog.Logger
	engine *render.Engine
	token  string // this instance's claim token
	// sources keeps the HTML and text sources of sends decoded: most sends
	// repeat one.
	sources *schemas.SourceCache

	provMu    sync.Mutex
	providers map[string]email.Provider
	keys      keyCache

	queue chan *job
	// tasks feeds the Workers long-lived hand-off goroutines. They are not
	// started per message: a fresh goroutine grew its stack through every
	// render (3.6% of the server's CPU in transactional-e2e).
	tasks chan func()

	mu          sync.Mutex
	inflight    map[string]bool // message ids queued or being handled
	outstanding int
	idle        chan struct{} // closed when outstanding drops to 0

	runCtx context.Context
	stop   context.CancelFunc
	done   sync.WaitGroup
}

var (
	_ pipeline.Stage   = (*Stage)(nil)
	_ pipeline.Flusher = (*Stage)(nil)
	_ pipeline.Closer  = (*Stage)(nil)
)

// New builds the stage on r.Postgres (a small pool of its own to that
// database) and r.Publisher (both required) and starts its dispatchers,
// which run until Close.
func New(ctx context.Context, r pipeline.Resources, cfg Config) (*Stage, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r.Postgres == nil || r.Publisher == nil {
		return nil, errors.New("delivery: needs Postgres and a Publisher")
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
	pg, err := pgsink.LookupPool(ctx, r.Postgres, max(4, cfg.Dispatchers+2), false)
	if err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	var tok [12]byte
	_, _ = rand.Read(tok[:])
	runCtx, stop := context.WithCancel(context.Background())
	s := &Stage{
		cfg: cfg, pg: pg, pub: r.Publisher, log: log.With("stage", Name), engine: render.NewEngineWithBudget(0, cfg.Render),
		token: hex.EncodeToString(tok[:]), sources: schemas.NewSourceCache(32<<20, false), providers: map[string]email.Provider{},
		keys:  keyCache{m: map[string]keyEntry{}, ttl: time.Minute},
		queue: make(chan *job, cfg.Queue), tasks: make(chan func()),
		inflight: map[string]bool{}, idle: closedChan(), runCtx: runCtx, stop: stop,
	}
	for i := 0; i < cfg.Dispatchers; i++ {
		s.done.Add(1)
		go s.dispatch()
	}
	for i := 0; i < cfg.Workers; i++ {
		s.done.Add(1)
		go s.work()
	}
	return s, nil
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// provider returns the provider plugin of a name, opened once.
func (s *Stage) provider(name string) (email.Provider, error) {
	if name == "" {
		name = "smtp"
	}
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

// job is one envelope being delivered.
type job struct {
	env       schemas.Envelope
	p         schemas.SendPayload
	attempts  int
	notBefore time.Time
	restored  bool // its missing row was stored again from the envelope
}

// Handle queues a transactional.send.v1 envelope for the dispatchers and
// returns at once; other types are skipped. A duplicate of an envelope
// still in hand is dropped. While the message's provider has its breaker
// open, Handle returns an error wrapping pipeline.ErrBreakerOpen so the
// runner waits without consuming more.
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
	if !p.Spilled {
		prov, blocked, err := s.gate(p.Policy.Provider)
		if err != nil {
			return nil, pipeline.Permanent(err)
		}
		if blocked {
			return nil, fmt.Errorf("delivery: provider %s: %w", prov.Name(), pipeline.ErrBreakerOpen)
		}
	}
	s.mu.Lock()
	if s.inflight[p.MessageID] {
		s.mu.Unlock()
		return nil, nil
	}
	s.inflight[p.MessageID] = true
	if s.outstanding == 0 {
		s.idle = make(chan struct{})
	}
	s.outstanding++
	s.mu.Unlock()
	select {
	case s.queue <- &job{env: env, p: p}:
		return nil, nil
	case <-ctx.Done():
		s.finishJob(p.MessageID)
		return nil, ctx.Err()
	}
}

// finishJob marks a job done.
func (s *Stage) finishJob(id string) {
	s.mu.Lock()
	delete(s.inflight, id)
	s.outstanding--
	if s.outstanding == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
}

// Flush waits until every envelope handed to Handle is finished: sent or
// failed and recorded, its outputs published, or skipped as a duplicate.
func (s *Stage) Flush(ctx context.Context) error {
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("delivery: flush: %w", ctx.Err())
	}
}

// Close stops the dispatchers (work in hand is abandoned; its envelopes were
// not committed and will be read again) and closes the providers.
func (s *Stage) Close() error {
	s.stop()
	s.done.Wait()
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

// work runs hand-offs until Close.
func (s *Stage) work() {
	defer s.done.Done()
	for {
		select {
		case task := <-s.tasks:
			task()
		case <-s.runCtx.Done():
			return
		}
	}
}

// dispatch takes batches from the queue until Close.
func (s *Stage) dispatch() {
	defer s.done.Done()
	for {
		var first *job
		select {
		case first = <-s.queue:
		case <-s.runCtx.Done():
			return
		}
		batch := []*job{first}
	fill:
		for len(batch) < s.cfg.BatchMax {
			select {
			case j := <-s.queue:
				batch = append(batch, j)
			default:
				break fill
			}
		}
		s.process(batch)
	}
}

// requeue puts a job back after its retry delay.
func (s *Stage) requeue(j *job, wait time.Duration) {
	j.notBefore = s.cfg.Now().Add(wait)
	go func() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.runCtx.Done():
			return
		}
		select {
		case s.queue <- j:
		case <-s.runCtx.Done():
		}
	}()
}

func (s *Stage) backoff(attempts int) time.Duration {
	d := s.cfg.RetryMin << min(attempts, 16)
	if d > s.cfg.RetryMax || d <= 0 {
		d = s.cfg.RetryMax
	}
	return d
}

// outcome of one hand-off.
type outcome struct {
	j          *job
	status     string // sent, failed, or "" for retry later
	reason     string
	providerID string
	refused    []string
	retryWait  time.Duration
}

// process claims, sends and finishes one batch.
func (s *Stage) process(batch []*job) {
	ctx := s.runCtx
	if batch = s.withoutBlocked(batch); len(batch) == 0 {
		return
	}
	ids := make([]string, len(batch))
	byID := make(map[string]*job, len(batch))
	for i, j := range batch {
		ids[i] = j.p.MessageID
		byID[j.p.MessageID] = j
	}
	states, err := s.claim(ctx, ids)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("claim failed; retrying", "err", err, "messages", len(batch))
		for _, j := range batch {
			j.attempts++
			s.requeue(j, s.backoff(j.attempts))
		}
		return
	}
	var claimed, stale, missing []*job
	for _, j := range batch {
		switch states[j.p.MessageID] {
		case "":
			if j.restored || j.p.Spilled {
				// Its workspace is gone (or a stored payload was lost
				// with the row): nothing to send.
				s.log.Warn("message has no row; dropped", "id", j.p.MessageID, "workspace", j.env.Workspace)
				s.finishJob(j.p.MessageID)
				continue
			}
			missing = append(missing, j)
		case "claimed":
			claimed = append(claimed, j)
		case "busy":
			// Another worker is handing it off: look again later.
			j.attempts++
			s.requeue(j, s.backoff(j.attempts))
		case "stale":
			stale = append(stale, j)
		default: // done
			s.finishJob(j.p.MessageID)
		}
	}
	if len(missing) > 0 {
		s.retryPG(ctx, "restore missing rows", func() error { return s.restore(ctx, missing) })
		for _, j := range missing {
			j.restored = true
			s.requeue(j, 0)
		}
	}
	if len(stale) > 0 {
		for _, j := range stale {
			out := outcome{j: j, status: schemas.MessageFailed, reason: "delivery outcome unknown: the worker handing it to the provider stopped; not retried to avoid sending twice"}
			s.publishOutputs(ctx, []outcome{out}, map[string]time.Time{j.p.MessageID: s.cfg.Now()})
			s.finishJob(j.p.MessageID)
		}
	}
	if len(claimed) == 0 {
		return
	}
	if err := s.loadSpilled(ctx, claimed); err != nil {
		s.log.Warn("load stored payloads failed; retrying", "err", err)
		s.releaseAndRetry(ctx, claimed)
		return
	}

	outs := make([]outcome, len(claimed))
	var wg sync.WaitGroup
	for i, j := range claimed {
		wg.Add(1)
		task := func() {
			defer wg.Done()
			outs[i] = s.deliver(ctx, j)
		}
		select {
		case s.tasks <- task:
		case <-ctx.Done():
			return
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}

	var final, retry []outcome
	for _, o := range outs {
		if o.status == "" {
			retry = append(retry, o)
		} else {
			final = append(final, o)
		}
	}
	if len(retry) > 0 {
		rids := make([]string, len(retry))
		for i, o := range retry {
			rids[i] = o.j.p.MessageID
		}
		s.retryPG(ctx, "release claims", func() error {
			_, err := s.pg.Exec(ctx, sqlRelease, s.token, rids)
			return err
		})
		for _, o := range retry {
			o.j.attempts++
			s.requeue(o.j, max(o.retryWait, s.backoff(o.j.attempts)))
		}
	}
	if len(final) == 0 {
		return
	}
	var at map[string]time.Time
	s.retryPG(ctx, "record outcomes", func() error {
		var err error
		at, err = s.finish(ctx, final)
		return err
	})
	if ctx.Err() != nil {
		return
	}
	s.publishOutputs(ctx, final, at)
	for _, o := range final {
		s.finishJob(o.j.p.MessageID)
	}
}

// withoutBlocked returns the jobs whose provider takes messages now and
// puts the others back until their retry time: while a provider's breaker
// is open its messages are neither claimed (and released again) in
// Postgres nor rendered, which during an outage of the relay otherwise
// churned through every message in hand once per retry interval.
func (s *Stage) withoutBlocked(batch []*job) []*job {
	ready := batch[:0]
	for _, j := range batch {
		// An unknown provider is not blocked: deliver fails the message.
		_, blocked, _ := s.gate(j.p.Policy.Provider)
		if blocked && !j.p.Spilled {
			j.attempts++
			s.requeue(j, s.backoff(j.attempts))
			continue
		}
		ready = append(ready, j)
	}
	return ready
}

// gate returns the named provider and whether its breaker is open.
func (s *Stage) gate(name string) (prov email.Provider, blocked bool, err error) {
	if prov, err = s.provider(name); err != nil {
		return nil, false, err
	}
	g, ok := prov.(email.Gate)
	return prov, ok && g.Blocked(), nil
}

func (s *Stage) releaseAndRetry(ctx context.Context, jobs []*job) {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.p.MessageID
	}
	s.retryPG(ctx, "release claims", func() error {
		_, err := s.pg.Exec(ctx, sqlRelease, s.token, ids)
		return err
	})
	for _, j := range jobs {
		j.attempts++
		s.requeue(j, s.backoff(j.attempts))
	}
}

// retryPG runs fn until it succeeds or the stage closes: the outcome of a
// hand-off must be recorded.
func (s *Stage) retryPG(ctx context.Context, what string, fn func() error) {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || ctx.Err() != nil {
			return
		}
		wait := s.backoff(attempt)
		s.log.Warn("postgres write failed; retrying", "what", what, "err", err, "retryIn", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

// claim returns each id's state (claim.sql): it claims the queued ones in
// one update (claim_queued.sql), which is every one in the common case, and
// runs claim.sql only for the rest. claim.sql alone would lock every row
// before updating it, a second write of each row.
func (s *Stage) claim(ctx context.Context, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	rows, err := s.pg.Query(ctx, sqlClaimQueued, ids, s.token)
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	var id, state string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error { out[id] = "claimed"; return nil })
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	var rest []string
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	rows, err = s.pg.Query(ctx, sqlClaim, rest, s.token, s.cfg.ClaimLease.Seconds())
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	_, err = pgx.ForEachRow(rows, []any{&id, &state}, func() error { out[id] = state; return nil })
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	return out, nil
}

// restore stores the rows of messages that have none from their envelopes.
func (s *Stage) restore(ctx context.Context, jobs []*job) error {
	n := len(jobs)
	cols := make([][]string, 9)
	for i := range cols {
		cols[i] = make([]string, n)
	}
	at := make([]time.Time, n)
	for i, j := range jobs {
		p := j.p
		contactID := ""
		if p.Contact != nil {
			contactID = p.Contact.ID
		}
		provider := p.Policy.Provider
		if provider == "" {
			provider = "smtp"
		}
		for c, v := range []string{p.MessageID, j.env.Workspace, p.ExternalID, p.To, contactID, p.RFCMessageID, p.Policy.ID, p.TemplateID, provider} {
			cols[c][i] = v
		}
		at[i] = p.AcceptedAt
		if at[i].IsZero() {
			at[i] = j.env.OccurredAt
		}
	}
	_, err := s.pg.Exec(ctx, sqlRestore, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8], at)
	if err != nil {
		return fmt.Errorf("restore rows: %w", err)
	}
	return nil
}

// loadSpilled replaces reference payloads with the stored ones.
func (s *Stage) loadSpilled(ctx context.Context, jobs []*job) error {
	var ids []string
	for _, j := range jobs {
		if j.p.Spilled {
			ids = append(ids, j.p.MessageID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := s.pg.Query(ctx, sqlPayloads, ids)
	if err != nil {
		return fmt.Errorf("load payloads: %w", err)
	}
	got := map[string][]byte{}
	var id string
	var b []byte
	if _, err := pgx.ForEachRow(rows, []any{&id, &b}, func() error { got[id] = append([]byte(nil), b...); return nil }); err != nil {
		return fmt.Errorf("load payloads: %w", err)
	}
	for _, j := range jobs {
		if !j.p.Spilled {
			continue
		}
		raw, ok := got[j.p.MessageID]
		if !ok {
			// Finished before (the payload is deleted then): claim said
			// queued, so this cannot happen short of manual edits.
			return fmt.Errorf("load payloads: message %s has no stored payload", j.p.MessageID)
		}
		p, err := schemas.DecodeSendPayload(raw)
		if err != nil {
			return fmt.Errorf("load payloads: decode %s: %w", j.p.MessageID, err)
		}
		j.p = p
	}
	return nil
}

// finish records outcomes and returns each message's time of change.
func (s *Stage) finish(ctx context.Context, outs []outcome) (map[string]time.Time, error) {
	n := len(outs)
	ids, statuses, reasons, pids := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, o := range outs {
		ids[i], statuses[i], reasons[i], pids[i] = o.j.p.MessageID, o.status, o.reason, o.providerID
	}
	rows, err := s.pg.Query(ctx, sqlFinish, s.token, ids, statuses, reasons, pids)
	if err != nil {
		return nil, fmt.Errorf("record outcomes: %w", err)
	}
	at := make(map[string]time.Time, n)
	var id string
	var t time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &t}, func() error { at[id] = t; return nil }); err != nil {
		return nil, fmt.Errorf("record outcomes: %w", err)
	}
	return at, nil
}

// publishOutputs publishes TRANSACTIONAL_SENT and the status envelopes of
// recorded outcomes, retrying until it works or the stage closes.
func (s *Stage) publishOutputs(ctx context.Context, outs []outcome, at map[string]time.Time) {
	var hooks, statuses []schemas.Envelope
	for _, o := range outs {
		p := o.j.p
		when, ok := at[p.MessageID]
		if !ok {
			// Not recorded by us (claim lost to a report): nothing to say.
			continue
		}
		when = when.UTC()
		ws := o.j.env.Workspace
		key := ws + ":" + p.MessageID
		provider := p.Policy.Provider
		if provider == "" {
			provider = "smtp"
		}
		sp := schemas.StatusPayload{MessageID: p.MessageID, Status: o.status, At: when, To: p.To, ExternalID: p.ExternalID,
			TemplateID: p.TemplateID, PolicyID: p.Policy.ID, Provider: provider, Detail: o.reason}
		if o.status == schemas.MessageSent && len(o.refused) > 0 {
			sp.Detail = "refused copies: " + strings.Join(o.refused, ", ")
		}
		sb, err := schemas.AppendStatusPayload(make([]byte, 0, 256), &sp)
		if err != nil {
			s.log.Error("encode status payload", "messageId", p.MessageID, "err", err)
			continue
		}
		statuses = append(statuses, schemas.Envelope{ID: schemas.ChildID(p.MessageID, schemas.TypeTransactionalStatus+"/"+o.status, 0),
			Workspace: ws, Type: schemas.TypeTransactionalStatus, Key: key, OccurredAt: when, CausationID: o.j.env.ID,
			Traceparent: o.j.env.Traceparent, Payload: sb})
		if o.status == schemas.MessageSent {
			hb, _ := schemas.AppendMessageEventData(make([]byte, 0, 192), &schemas.MessageEventData{MessageID: p.MessageID,
				RFCMessageID: p.RFCMessageID, Email: p.To, ExternalID: p.ExternalID, Provider: provider, OccurredAt: when})
			hooks = append(hooks, schemas.Envelope{ID: schemas.ChildID(p.MessageID, schemas.TypeWebhookTransactionalSent, 0),
				Workspace: ws, Type: schemas.TypeWebhookTransactionalSent, Key: key, OccurredAt: when, CausationID: o.j.env.ID,
				Traceparent: o.j.env.Traceparent, Payload: hb})
		}
	}
	for _, g := range []struct {
		topic string
		envs  []schemas.Envelope
	}{{schemas.TopicWebhooks, hooks}, {schemas.TopicTransactional, statuses}} {
		if len(g.envs) == 0 {
			continue
		}
		for attempt := 0; ; attempt++ {
			err := s.pub.Publish(ctx, g.topic, g.envs...)
			if err == nil || ctx.Err() != nil {
				break
			}
			wait := s.backoff(attempt)
			s.log.Warn("publish outputs failed; retrying", "topic", g.topic, "err", err, "retryIn", wait)
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
	}
}

// deliver renders, builds, signs and hands off one claimed message.
func (s *Stage) deliver(ctx context.Context, j *job) outcome {
	p := j.p
	prov, err := s.provider(p.Policy.Provider)
	if err != nil {
		return outcome{j: j, status: schemas.MessageFailed, reason: "no provider: " + err.Error()}
	}
	raw, err := s.build(ctx, j.env.Workspace, p)
	if err != nil {
		var perm permanentBuild
		if errors.As(err, &perm) {
			return outcome{j: j, status: schemas.MessageFailed, reason: err.Error()}
		}
		return outcome{j: j, retryWait: s.cfg.RetryMin}
	}
	rcpts := append([]string{p.To}, p.Cc...)
	rcpts = append(rcpts, p.Bcc...)
	rec, err := prov.Send(ctx, &email.Message{ID: p.MessageID, From: p.From.Email, Recipients: rcpts, Raw: raw})
	switch {
	case err == nil:
		return outcome{j: j, status: schemas.MessageSent, providerID: rec.ProviderMessageID, refused: rec.Refused}
	case email.IsRefused(err):
		return outcome{j: j, status: schemas.MessageFailed, reason: "provider refused the message: " + strings.TrimPrefix(err.Error(), "refused: ")}
	case email.IsUnknownOutcome(err):
		return outcome{j: j, status: schemas.MessageFailed, reason: "delivery outcome unknown (" + err.Error() + "); not retried to avoid sending twice"}
	default:
		wait := time.Duration(0)
		if errors.Is(err, pipeline.ErrBreakerOpen) {
			wait = s.cfg.RetryMax / 2
		}
		s.log.Debug("provider unavailable; will retry", "id", p.MessageID, "err", err)
		return outcome{j: j, retryWait: wait}
	}
}

// permanentBuild is a message that cannot be built (a template that fails
// to render): it fails rather than retries.
type permanentBuild struct{ err error }

func (e permanentBuild) Error() string { return e.err.Error() }
func (e permanentBuild) Unwrap() error { return e.err }

// build renders the message and returns its signed RFC 5322 bytes.
func (s *Stage) build(ctx context.Context, ws string, p schemas.SendPayload) ([]byte, error) {
	compiled, err := s.engine.Compile(render.Source{Subject: p.Subject, Preheader: p.Preheader, HTML: p.HTML, Text: p.Text})
	if err != nil {
		return nil, permanentBuild{fmt.Errorf("template error: %w", err)}
	}
	data, _, err := render.DecodeData(p.Data)
	if err != nil {
		return nil, permanentBuild{fmt.Errorf("decode data: %w", err)}
	}
	var rc *render.Contact
	var custom map[string]any
	if c := p.Contact; c != nil {
		rc = &render.Contact{ID: c.ID, Email: c.Email, FirstName: c.FirstName, Country: c.Country, Language: c.Language, Status: c.Status}
		custom = c.CustomFields
	}
	out, err := compiled.Render(render.NewBindings(data, rc, custom))
	if err != nil {
		return nil, permanentBuild{fmt.Errorf("template error: %w", err)}
	}
	html, text := email.InsertPreheader(out.HTML, out.Preheader), out.Text
	content := email.Content{
		MessageID: p.RFCMessageID, Date: s.cfg.Now(), From: email.Address{Email: p.From.Email, Name: p.From.Name},
		To: p.To, Cc: p.Cc, ReplyTo: p.ReplyTo, Subject: out.Subject,
		Headers: [][2]string{{"X-Sendstream-Message-Id", p.MessageID}},
	}
	if p.Policy.Kind == schemas.PolicyMarketing {
		contactID := ""
		if p.Contact != nil {
			contactID = p.Contact.ID
		}
		u := email.UnsubscribeURL(s.cfg.SiteURL, s.cfg.Secret, email.Unsubscribe{Workspace: ws, Email: p.To, ContactID: contactID, MessageID: p.MessageID})
		name := p.WorkspaceName
		if name == "" {
			name = "this sender"
		}
		fill := strings.NewReplacer("{{workspace}}", escapeHTML(name), "{{unsubscribe_url}}", escapeHTML(u))
		html = email.AppendFooter(html, fill.Replace(s.cfg.FooterHTML))
		text += strings.NewReplacer("{{workspace}}", name, "{{unsubscribe_url}}", u).Replace(s.cfg.FooterText)
		content.ListUnsubscribe = u
	}
	content.HTML, content.Text = html, text
	for _, a := range p.Attachments {
		content.Parts = append(content.Parts, email.Part{Filename: a.Filename, ContentType: a.ContentType, ContentID: a.ContentID, Content: a.Content})
	}
	raw, err := email.Build(content)
	if err != nil {
		return nil, permanentBuild{err}
	}
	domain := p.From.Email[strings.LastIndexByte(p.From.Email, '@')+1:]
	key, err := s.keys.get(ctx, s.pg, ws, domain)
	if err != nil {
		return nil, err // Postgres unavailable: retry
	}
	if key == nil {
		return raw, nil
	}
	signed, err := email.Sign(raw, *key)
	if err != nil {
		return nil, permanentBuild{err}
	}
	return signed, nil
}

func escapeHTML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;").Replace(s)
}

// keyCache holds DKIM keys by workspace and domain for ttl (nil: the domain
// does not sign).
type keyCache struct {
	mu  sync.Mutex
	m   map[string]keyEntry
	ttl time.Duration
}

type keyEntry struct {
	key *email.DKIMKey
	at  time.Time
}

func (c *keyCache) get(ctx context.Context, pg *pgxpool.Pool, ws, domain string) (*email.DKIMKey, error) {
	k := ws + "\x00" + domain
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && time.Since(e.at) < c.ttl {
		return e.key, nil
	}
	var selector string
	var pemKey *string
	err := pg.QueryRow(ctx, sqlDKIMKey, ws, domain).Scan(&selector, &pemKey)
	var key *email.DKIMKey
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("read dkim key: %w", err)
	case pemKey != nil && *pemKey != "":
		var signer crypto.Signer
		if signer, err = email.ParseDKIMKey(*pemKey); err != nil {
			return nil, permanentBuild{err}
		}
		key = &email.DKIMKey{Domain: domain, Selector: selector, Signer: signer}
	}
	c.mu.Lock()
	if len(c.m) > 10000 {
		clear(c.m)
	}
	c.m[k] = keyEntry{key: key, at: time.Now()}
	c.mu.Unlock()
	return key, nil
}
