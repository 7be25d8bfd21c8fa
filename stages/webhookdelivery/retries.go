package webhookdelivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"sendstream/pipeline"
	"sendstream/schemas"
	pgsink "sendstream/sinks/postgres"
)

// This file holds the durable part of the schedule: a retry after the
// quick attempts (or after a 429 whose wait is longer than theirs) is a
// River job in Postgres, scheduled at the attempt's NextAttemptAt, which
// publishes the delivery again with the next attempt number when due. Jobs
// survive restarts and kill -9; River promotes due jobs about every 5 s.

// retryArgs is the job of one scheduled attempt: the delivery envelope to
// publish. Jobs are unique by EnvelopeID, so handling an envelope again
// schedules its retry once.
type retryArgs struct {
	EnvelopeID string           `json:"envelopeId" river:"unique"`
	Envelope   schemas.Envelope `json:"envelope"`
}

// Kind names the job kind.
func (retryArgs) Kind() string { return "webhook_delivery_retry" }

// retryWorker publishes due retries to TopicWebhookDeliveries.
type retryWorker struct {
	river.WorkerDefaults[retryArgs]
	pub pipeline.Publisher
}

// Work publishes the delivery; an error is retried by River.
func (w *retryWorker) Work(ctx context.Context, job *river.Job[retryArgs]) error {
	if err := w.pub.Publish(ctx, schemas.TopicWebhookDeliveries, job.Args.Envelope); err != nil {
		return fmt.Errorf("publish scheduled webhook delivery %s: %w", job.Args.EnvelopeID, err)
	}
	return nil
}

// pruneArgs is the periodic job that forgets old claims of attempts.
type pruneArgs struct{}

// Kind names the job kind.
func (pruneArgs) Kind() string { return "webhook_delivery_claims_prune" }

// pruneWorker deletes claims older than ClaimRetention.
type pruneWorker struct {
	river.WorkerDefaults[pruneArgs]
	pg *pgxpool.Pool
}

// Work prunes; an error is retried by River.
func (w *pruneWorker) Work(ctx context.Context, _ *river.Job[pruneArgs]) error {
	return prune(ctx, w.pg, ClaimRetention)
}

// Scheduler keeps scheduled retries in Postgres and publishes them when
// due, and holds the claims of attempts (claims.go), pruned hourly by a
// periodic job. Safe for concurrent use; Close stops it.
type Scheduler struct {
	client  *river.Client[pgx.Tx]
	queue   string
	claims  *claims
	inserts pgsink.Batcher[scheduled, struct{}]
}

// scheduled is one delivery envelope to publish at a time.
type scheduled struct {
	next schemas.Envelope
	at   time.Time
}

// DefaultQueue is the River queue of scheduled deliveries.
const DefaultQueue = "webhook_deliveries"

// QueueFor is the River queue of the scheduled deliveries of a deployment
// whose topics carry prefix (SENDSTREAM_TOPIC_PREFIX, the stage setting
// topic_prefix): deployments sharing a database but not their topics
// (tests, a benchmark, staging beside production) must not work each
// other's jobs, whose envelopes would be published to the wrong topics.
// "" gives DefaultQueue; the prefix's letters and digits are kept, every
// other run of characters becomes one "_", and a name over River's 64
// characters is cut and ends with a hash of the prefix.
func QueueFor(prefix string) string {
	if prefix == "" {
		return DefaultQueue
	}
	var b strings.Builder
	b.WriteString(DefaultQueue)
	sep := true
	for _, r := range strings.ToLower(prefix) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if sep {
				b.WriteByte('_')
				sep = false
			}
			b.WriteRune(r)
		} else {
			sep = true
		}
	}
	q := b.String()
	if len(q) > 64 {
		h := sha256.Sum256([]byte(prefix))
		q = strings.TrimRight(q[:47], "_") + "_" + hex.EncodeToString(h[:8])
	}
	return q
}

// SchedulerConfig configures a Scheduler. Zero values take the defaults.
type SchedulerConfig struct {
	// Queue is the River queue its jobs go to and are worked from
	// (default DefaultQueue); every process working it publishes them.
	Queue string
	// Workers bounds the jobs published at once (default 32).
	Workers int
	Logger  *slog.Logger
}

// StartScheduler migrates River's tables on pg (rivermigrate, up) and
// starts its client, which publishes due retries with pub until Close.
func StartScheduler(ctx context.Context, pg *pgxpool.Pool, pub pipeline.Publisher, cfg SchedulerConfig) (*Scheduler, error) {
	if cfg.Queue == "" {
		cfg.Queue = DefaultQueue
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 32
	}
	logger := cfg.Logger
	driver := riverpgxv5.New(pg)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: quiet(logger)})
	if err != nil {
		return nil, fmt.Errorf("webhook retry queue: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("webhook retry queue: migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &retryWorker{pub: pub})
	river.AddWorker(workers, &pruneWorker{pg: pg})
	queue := cfg.Queue
	c, err := river.NewClient(driver, &river.Config{
		Queues:  map[string]river.QueueConfig{cfg.Queue: {MaxWorkers: cfg.Workers}},
		Workers: workers,
		Logger:  quiet(logger),
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return pruneArgs{}, &river.InsertOpts{Queue: queue} },
			&river.PeriodicJobOpts{RunOnStart: true})},
	})
	if err != nil {
		return nil, fmt.Errorf("webhook retry queue: %w", err)
	}
	// The client's own context: it runs until Close, not until ctx ends.
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("webhook retry queue: start: %w", err)
	}
	sc := &Scheduler{client: c, queue: cfg.Queue, claims: newClaims(pg)}
	sc.inserts = pgsink.Batcher[scheduled, struct{}]{Workers: 2, Max: 256, Timeout: 10 * time.Second, Run: sc.insertBatch}
	return sc, nil
}

// Schedule stores next (a delivery envelope) to be published at at. The
// same envelope id scheduled again is one job. Concurrent calls share
// inserts (River's InsertMany).
func (s *Scheduler) Schedule(ctx context.Context, next schemas.Envelope, at time.Time) error {
	if _, err := s.inserts.Do(ctx, scheduled{next: next, at: at}); err != nil {
		return fmt.Errorf("schedule webhook delivery %s: %w", next.ID, err)
	}
	return nil
}

// insertBatch inserts the jobs of a batch in one transaction, each
// envelope id once.
func (s *Scheduler) insertBatch(ctx context.Context, ins []scheduled) ([]struct{}, error) {
	seen := make(map[string]bool, len(ins))
	params := make([]river.InsertManyParams, 0, len(ins))
	for _, in := range ins {
		if seen[in.next.ID] {
			continue
		}
		seen[in.next.ID] = true
		params = append(params, river.InsertManyParams{Args: retryArgs{EnvelopeID: in.next.ID, Envelope: in.next},
			InsertOpts: &river.InsertOpts{Queue: s.queue, ScheduledAt: in.at, UniqueOpts: river.UniqueOpts{ByArgs: true}}})
	}
	if _, err := s.client.InsertMany(ctx, params); err != nil {
		return nil, err
	}
	return make([]struct{}, len(ins)), nil
}

// Close stops the client, letting running jobs finish for up to 10 s.
func (s *Scheduler) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer s.claims.close()
	s.inserts.Close()
	if err := s.client.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stop webhook retry queue: %w", err)
	}
	return nil
}

// quiet returns logger, or a logger discarding everything when nil.
func quiet(logger *slog.Logger) *slog.Logger {
	if logger != nil {
		return logger
	}
	return slog.New(slog.DiscardHandler)
}

// nextEnvelope returns the delivery envelope d (its Attempt and Throttled
// already those of the next try) due at at. Its id is
// ChildID(MessageID+"/"+TargetID, TypeWebhookDelivery, Attempt), or, when
// it repeats an attempt after a 429, the same with "/throttled" and the
// throttle count; a replay adds "/replay/<envelope id>".
func nextEnvelope(env schemas.Envelope, d schemas.WebhookDelivery, throttled bool, at time.Time) (schemas.Envelope, error) {
	p, err := json.Marshal(d)
	if err != nil {
		return schemas.Envelope{}, fmt.Errorf("next webhook delivery of %s: %w", env.ID, err)
	}
	base := d.MessageID + "/" + d.TargetID
	if d.Replay {
		base += "/replay/" + env.ID
	}
	id := schemas.ChildID(base, schemas.TypeWebhookDelivery, d.Attempt)
	if throttled {
		id = schemas.ChildID(base+"/throttled", schemas.TypeWebhookDelivery, d.Throttled)
	}
	return schemas.Envelope{ID: id, Workspace: env.Workspace, Type: schemas.TypeWebhookDelivery, Key: env.Key,
		OccurredAt: at.UTC(), Attempt: 0, CausationID: env.ID, Traceparent: env.Traceparent, Payload: p}, nil
}

// deferredEnvelope returns the delivery d of env again, unchanged (the
// same attempt and throttle count), due at at: a deferral (Stage.defer_).
// Its id derives from env's and d's attempt, so handling env again defers
// it once.
func deferredEnvelope(env schemas.Envelope, d schemas.WebhookDelivery, at time.Time) (schemas.Envelope, error) {
	p, err := json.Marshal(d)
	if err != nil {
		return schemas.Envelope{}, fmt.Errorf("deferred webhook delivery of %s: %w", env.ID, err)
	}
	id := schemas.ChildID(fmt.Sprintf("%s/deferred/%d/%d", env.ID, d.Attempt, d.Throttled), schemas.TypeWebhookDelivery, 0)
	return schemas.Envelope{ID: id, Workspace: env.Workspace, Type: schemas.TypeWebhookDelivery, Key: env.Key,
		OccurredAt: at.UTC(), CausationID: env.ID, Traceparent: env.Traceparent, Payload: p}, nil
}
