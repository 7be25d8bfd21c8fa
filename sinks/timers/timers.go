// Package timers keeps durable timers in Postgres: "publish this envelope
// to this topic at that time". A timer is a River job
// (github.com/riverqueue/river, pgx v5 driver) of one kind whose worker
// publishes the envelope it carries with acks=all; jobs survive restarts
// and kill -9 of any process, and a job whose worker died mid-run is
// rescued after RescueAfter (well below River's one-hour default) and run
// again. Timers of Schedule are unique by envelope id: scheduling the
// same envelope twice (a handler that ran again after a crash) is one
// timer (ScheduleMany's are not, see there); the publish itself is at
// least once, so consumers deduplicate by env.ID as
// they do for every envelope.
//
// One River client per process: Shared starts it on first use and every
// user of the process (the journey engine, and webhook retries once they
// move here) shares it; Schedule within the caller's Postgres transaction
// (InsertTx) commits the timer with the state change that wants it.
//
// Time: timers fire by the real clock, unless Config.Clock injects another
// (tests moving a journey's days forward). River then reads that clock
// (Config.Test.Time) wherever it compares times: its scheduler makes a
// timer available once the clock passes it and its workers fetch by it.
// A client on an injected clock keeps River's tables in a Postgres schema
// of its own, named like its queue (see Config.Clock).
package timers

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"sendstream/schemas"
)

//go:embed sql/create_schema.sql
var sqlCreateSchema string

var (
	//go:embed sql/migrate_lock.sql
	sqlMigrateLock string
	//go:embed sql/migrate_unlock.sql
	sqlMigrateUnlock string
)

// Publisher publishes envelopes with acks=all (pipeline.Publisher).
type Publisher interface {
	Publish(ctx context.Context, topic string, envs ...schemas.Envelope) error
}

// DefaultQueue is the River queue timers go to and are worked from.
const DefaultQueue = "timers"

// QueueFor is the queue of the timers of a deployment whose topics carry
// prefix (SENDSTREAM_TOPIC_PREFIX): deployments sharing a database but not
// their topics (tests, staging beside production) must not publish each
// other's timers, which name topics without the prefix. "" gives
// DefaultQueue; a long prefix is cut to River's 64 characters with a hash.
func QueueFor(prefix string) string {
	if prefix == "" {
		return DefaultQueue
	}
	var b strings.Builder
	b.WriteString(DefaultQueue + "_")
	for _, r := range strings.ToLower(prefix) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	q := strings.TrimRight(b.String(), "_")
	if len(q) > 64 {
		h := sha256.Sum256([]byte(prefix))
		q = q[:47] + "_" + hex.EncodeToString(h[:8])
	}
	return q
}

// DefaultRescueAfter is how long a timer job may stay running before
// River's rescuer makes it available again (its worker died): a publish
// takes milliseconds, so a minute is generous and a crashed worker's timer
// fires about a minute late instead of an hour.
const DefaultRescueAfter = time.Minute

// DefaultWorkers is how many timers a process publishes at once. A
// publish waits for the broker's ack, so a worker is mostly a waiting
// goroutine; River fetches at most the free workers' worth of jobs, at
// most once per fetchCooldown, so workers / fetchCooldown bounds the
// firing rate (River's defaults, 64 per 100 ms, left 10,000 timers due
// within 39 s up to 10.8 s late at p99 on a loaded two-core host; 512 per
// 50 ms with the poll below: 2.4 s).
const DefaultWorkers = 512

// fetchCooldown is the least time between two fetches of due timers, and
// fetchPollInterval the most: River fetches at once on an insert's
// notification, but a timer scheduled ahead falls due silently (River's
// scheduler makes jobs due within its next 5 s available early), so the
// periodic fetch finds it, up to fetchPollInterval after its time (River's
// default is 1 s). An idle poll is one indexed query.
const (
	fetchCooldown     = 50 * time.Millisecond
	fetchPollInterval = 200 * time.Millisecond
)

// jobArgs is one timer: the envelope to publish and its topic. Schedule's
// are unique by EnvelopeID (River's ByArgs with only the tagged field).
type jobArgs struct {
	EnvelopeID string         `json:"envelopeId" river:"unique"`
	Topic      string         `json:"topic"`
	Envelope   packedEnvelope `json:"envelope"`
}

// packedEnvelope is a timer's envelope stored as one JSON string in the
// job's args instead of a nested object. River's jobs table has a GIN
// index on args, which every insert and every state change of a job (to
// available, running, completed: none is a HOT update) writes one entry
// per key and scalar value into: a nested envelope made about twenty, a
// string one. Timers stored before as an object still decode.
type packedEnvelope struct{ schemas.Envelope }

// MarshalJSON writes the envelope's JSON as a JSON string, with the
// envelope codec's encoder (json.Marshal's bytes, without reflection).
func (p packedEnvelope) MarshalJSON() ([]byte, error) {
	b, err := schemas.AppendEnvelope(nil, &p.Envelope)
	if err != nil {
		return nil, err
	}
	return schemas.AppendJSONString(make([]byte, 0, len(b)+len(b)/4+2), string(b)), nil
}

// UnmarshalJSON reads a packed envelope, or an object as stored before.
func (p *packedEnvelope) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		return schemas.DecodeEnvelope([]byte(s), &p.Envelope)
	}
	return json.Unmarshal(b, &p.Envelope)
}

// Kind names the job kind.
func (jobArgs) Kind() string { return "timer_publish" }

// worker publishes due timers.
type worker struct {
	river.WorkerDefaults[jobArgs]
	pub Publisher
}

// Work publishes the timer's envelope; an error is retried by River.
func (w *worker) Work(ctx context.Context, job *river.Job[jobArgs]) error {
	if err := w.pub.Publish(ctx, job.Args.Topic, job.Args.Envelope.Envelope); err != nil {
		return fmt.Errorf("publish timer %s to %s: %w", job.Args.EnvelopeID, job.Args.Topic, err)
	}
	return nil
}

// Timeout bounds one publish (River cancels the job's context after it).
func (w *worker) Timeout(*river.Job[jobArgs]) time.Duration { return 30 * time.Second }

// Clock tells the time (pipeline.Clock).
type Clock interface {
	Now() time.Time
}

// Config configures the process's timers. Zero values take the defaults.
type Config struct {
	Queue       string        // default DefaultQueue
	Workers     int           // timers published at once (default DefaultWorkers)
	RescueAfter time.Duration // default DefaultRescueAfter; at least 31 s (above the job timeout)
	Logger      *slog.Logger  // nil: discard River's logs
	// Clock, when not nil, is the time timers fire by instead of the real
	// clock (tests only). River's tables then live in a Postgres schema
	// named like Queue, created if missing: River elects one leader per
	// schema, whose scheduler makes due timers available by its own
	// clock, so a client on another clock sharing the schema would fire
	// other processes' timers early and have its own fired late.
	Clock Clock
}

// riverClock is a Clock as River's time generator (rivertype.TimeGenerator).
type riverClock struct{ c Clock }

// Now returns the clock's time.
func (r riverClock) Now() time.Time { return r.c.Now() }

// NowOrNil returns the clock's time: River passes it to its queries
// instead of the database's now() (a nil would leave them on the real
// clock).
func (r riverClock) NowOrNil() *time.Time {
	t := r.c.Now().UTC()
	return &t
}

// Timers schedules timers and publishes them when due. Safe for concurrent
// use.
type Timers struct {
	client *river.Client[pgx.Tx]
	queue  string
}

// Start migrates River's tables on pg (rivermigrate, up), then starts a
// River client working cfg.Queue that publishes due timers with pub until
// Close. Most callers want Shared instead.
func Start(ctx context.Context, pg *pgxpool.Pool, pub Publisher, cfg Config) (*Timers, error) {
	t, err := open(ctx, pg, pub, cfg)
	if err != nil {
		return nil, err
	}
	// The client's own context: it runs until Close, not until ctx ends.
	if err := t.client.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("timers: start: %w", err)
	}
	return t, nil
}

// open migrates River's tables and makes the client working cfg.Queue
// with pub.
func open(ctx context.Context, pg *pgxpool.Pool, pub Publisher, cfg Config) (*Timers, error) {
	if cfg.Queue == "" {
		cfg.Queue = DefaultQueue
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.RescueAfter == 0 {
		cfg.RescueAfter = DefaultRescueAfter
	}
	if cfg.RescueAfter <= 30*time.Second {
		return nil, fmt.Errorf("timers: RescueAfter %s must be above the 30 s job timeout", cfg.RescueAfter)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	driver := riverpgxv5.New(pg)
	var schema string
	var test river.TestConfig
	if cfg.Clock != nil {
		schema, test.Time = cfg.Queue, riverClock{cfg.Clock}
	}
	if err := migrate(ctx, pg, driver, schema, logger); err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &worker{pub: pub})
	rc := &river.Config{Logger: logger, Schema: schema, Test: test,
		Queues:        map[string]river.QueueConfig{cfg.Queue: {MaxWorkers: cfg.Workers}},
		FetchCooldown: fetchCooldown, FetchPollInterval: fetchPollInterval,
		Workers: workers, RescueStuckJobsAfter: cfg.RescueAfter}
	c, err := river.NewClient(driver, rc)
	if err != nil {
		return nil, fmt.Errorf("timers: %w", err)
	}
	return &Timers{client: c, queue: cfg.Queue}, nil
}

// migrate creates schema (unless "") and migrates River's tables in it,
// one process at a time (migrate_lock.sql).
func migrate(ctx context.Context, pg *pgxpool.Pool, driver *riverpgxv5.Driver, schema string, logger *slog.Logger) error {
	conn, err := pg.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("timers: migrate River's tables: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, sqlMigrateLock); err != nil {
		return fmt.Errorf("timers: migrate River's tables: lock: %w", err)
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), sqlMigrateUnlock); err != nil {
			conn.Conn().Close(context.Background()) // closing the session releases the lock
		}
	}()
	if schema != "" {
		if _, err := conn.Exec(ctx, fmt.Sprintf(sqlCreateSchema, pgx.Identifier{schema}.Sanitize())); err != nil {
			return fmt.Errorf("timers: create schema %s: %w", schema, err)
		}
	}
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: logger, Schema: schema})
	if err != nil {
		return fmt.Errorf("timers: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("timers: migrate River's tables: %w", err)
	}
	return nil
}

// Schedule stores a timer that publishes env to topic at at (now or in the
// past: as soon as River gets to it), within tx when tx is not nil (the
// timer then exists exactly when tx commits), else on its own. The same
// env.ID scheduled again is the same timer: the call does nothing, even
// after the first one fired (until River prunes finished jobs, 24 h by
// default).
func (t *Timers) Schedule(ctx context.Context, tx pgx.Tx, topic string, env schemas.Envelope, at time.Time) error {
	args := jobArgs{EnvelopeID: env.ID, Topic: topic, Envelope: packedEnvelope{env}}
	opts := &river.InsertOpts{Queue: t.queue, ScheduledAt: at.UTC(), UniqueOpts: river.UniqueOpts{ByArgs: true}}
	var err error
	if tx != nil {
		_, err = t.client.InsertTx(ctx, tx, args, opts)
	} else {
		_, err = t.client.Insert(ctx, args, opts)
	}
	if err != nil {
		return fmt.Errorf("schedule timer %s on %s at %s: %w", env.ID, topic, at.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// Timer is one timer of ScheduleMany: publish Env to Topic at At.
type Timer struct {
	Topic string
	Env   schemas.Envelope
	At    time.Time
}

// ScheduleMany stores many timers within tx in one statement: the timers
// of several state changes committed together. Unlike Schedule's, these
// timers are not unique by envelope id. ScheduleMany is for timers that
// commit with a state change made once (an execution inserted by its
// start, a wait entered by a guarded move), so a second insert of one
// cannot happen; should one, its envelope is published twice, which
// consumers deduplicate by env.ID as they do every redelivery. Unique jobs
// cost River's scheduler a self-join per batch of due timers that Postgres
// planned as a nested loop whenever its statistics lagged the table:
// quadratic in the batch, 25.8 s for 8,794 timers falling due together
// (auto_explain, journeys benchmark), every one of them that late.
func (t *Timers) ScheduleMany(ctx context.Context, tx pgx.Tx, ts []Timer) error {
	if len(ts) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(ts))
	for i, tm := range ts {
		params[i] = river.InsertManyParams{Args: jobArgs{EnvelopeID: tm.Env.ID, Topic: tm.Topic, Envelope: packedEnvelope{tm.Env}},
			InsertOpts: &river.InsertOpts{Queue: t.queue, ScheduledAt: tm.At.UTC()}}
	}
	if _, err := t.client.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("schedule %d timers (first %s): %w", len(ts), ts[0].Env.ID, err)
	}
	return nil
}

// Close stops the client, letting running publishes finish for up to 10 s
// (an unfinished one is rescued later).
func (t *Timers) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := t.client.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stop timers: %w", err)
	}
	return nil
}

// shared is the process's Timers and how many users hold it.
var shared struct {
	mu    sync.Mutex
	t     *Timers
	users int
	pg    *pgxpool.Pool
}

// Shared returns the process's Timers, starting them on pg with pub and
// cfg on first use; later calls get the same Timers whatever they pass
// (their pool must be the first one's: one River client per database).
// Every call must be matched by one Release; the client stops with the
// last.
func Shared(ctx context.Context, pg *pgxpool.Pool, pub Publisher, cfg Config) (*Timers, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.t != nil {
		if shared.pg != pg {
			return nil, errors.New("timers: Shared called with a second Postgres pool; one River client per process")
		}
		shared.users++
		return shared.t, nil
	}
	t, err := Start(ctx, pg, pub, cfg)
	if err != nil {
		return nil, err
	}
	shared.t, shared.users, shared.pg = t, 1, pg
	return t, nil
}

// Release gives back one Shared; the last Release stops the client.
func Release() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.users == 0 {
		return nil
	}
	shared.users--
	if shared.users > 0 {
		return nil
	}
	t := shared.t
	shared.t, shared.pg = nil, nil
	return t.Close()
}
