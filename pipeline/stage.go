// Package pipeline runs stages: Kafka consumers that handle envelopes from one
// topic, publish what they return, and commit only after success. It owns
// producing, readers, commits, retries, the dead-letter topic, waiting out
// an open circuit breaker (sinks/breaker) and graceful drain, so a stage is
// one small file.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
)

// Stage handles envelopes from one topic.
//
// What may run concurrently: with Spec.Concurrency 0 or 1, Handle is called
// in order for one partition and never concurrently on one Stage value.
// With Concurrency N > 1, Handle is called concurrently, up to N calls at
// once, for envelopes with different keys, and strictly in order (one call
// after the other) for one key. The key is env.Key, the partition key the
// envelope was published with (a contact, a message, a subscription), or
// env.ID when Key is empty; a retry of an envelope holds its key, not the
// others.
//
// When an envelope counts as finished: when Handle returned without an error
// and the runner has published what it returned (acks=all), or when the
// envelope was sent to the dead-letter topic. The runner commits a
// partition only up to its first envelope not finished, so an envelope in
// flight, and everything after it in its partition, is read again after a
// crash or a rebalance. Every envelope can thus arrive more than once:
// Handle must be idempotent on env.ID. Handle is pure in the sense that it
// does not publish: it returns what to publish and the runner publishes it.
type Stage interface {
	Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error)
}

// Flusher is implemented by stages that buffer work in Handle (batch inserts).
// The runner calls Flush before it publishes the batch's outputs and commits
// its offsets; an error means nothing since the last successful Flush is
// durable, so the runner retries and, failing that, re-reads the batch.
// Handle then sees those envelopes again: a stage may keep or drop its
// buffer after a failed Flush, but must not write an envelope twice (dedup
// the buffer by env.ID, or write idempotently).
type Flusher interface {
	Flush(ctx context.Context) error
}

// Ignorer is implemented by a stage that can tell at once, without waiting
// on anything (a cached answer, never a query), that Handle would do
// nothing with an envelope: no output and no effect. The runner then passes
// over it as over a type the stage does not handle (Spec.Types): it is
// finished as it is read. Ignores runs on the fetching goroutine,
// concurrently with Handle; when in doubt it returns false.
type Ignorer interface {
	Ignores(env *schemas.Envelope) bool
}

// KindIgnorer is an Ignorer whose answer depends only on an envelope's
// type and workspace. Publish writes both into every record's headers, so
// the runner asks IgnoresKind before decoding and never decodes a record it
// ignores; a record without those headers is decoded and asked Ignores.
// The same rules hold: at once, from a cache, false when in doubt.
type KindIgnorer interface {
	Ignorer
	IgnoresKind(typ, workspace string) bool
}

// Closer is implemented by stages holding resources; the runner calls Close
// once after the last Handle and Flush.
type Closer interface {
	Close() error
}

// Publisher publishes envelopes with acks=all and returns once every one is
// durably acknowledged by the broker. It is safe for concurrent use.
type Publisher interface {
	Publish(ctx context.Context, topic string, envs ...schemas.Envelope) error
}

// Batch is envelopes bound for one topic: an argument of PublishBatches.
type Batch struct {
	Topic string
	Envs  []schemas.Envelope
}

// AddToBatch appends env to the batch of topic in batches, adding that
// batch at the end when there is none yet, and returns batches: envelopes
// grouped by topic, topics in first-use order, each topic's envelopes in
// the order they were added.
func AddToBatch(batches []Batch, topic string, env schemas.Envelope) []Batch {
	i := 0
	for i < len(batches) && batches[i].Topic != topic {
		i++
	}
	if i == len(batches) {
		batches = append(batches, Batch{Topic: topic})
	}
	batches[i].Envs = append(batches[i].Envs, env)
	return batches
}

// BatchPublisher is a Publisher that also publishes to several topics in
// one call and waits once for every acknowledgement. Producer is one.
type BatchPublisher interface {
	Publisher
	PublishBatches(ctx context.Context, batches ...Batch) error
}

// PublishBatches publishes every batch through pub and returns once all are
// acknowledged, or the first error. A BatchPublisher does it in one call;
// any other Publisher gets one Publish per batch, concurrently.
func PublishBatches(ctx context.Context, pub Publisher, batches ...Batch) error {
	if bp, ok := pub.(BatchPublisher); ok {
		return bp.PublishBatches(ctx, batches...)
	}
	switch len(batches) {
	case 0:
		return nil
	case 1:
		return pub.Publish(ctx, batches[0].Topic, batches[0].Envs...)
	}
	errs := make(chan error, len(batches)-1)
	for _, b := range batches[1:] {
		go func() { errs <- pub.Publish(ctx, b.Topic, b.Envs...) }()
	}
	err := pub.Publish(ctx, batches[0].Topic, batches[0].Envs...)
	for range batches[1:] {
		if e := <-errs; err == nil {
			err = e
		}
	}
	return err
}

// Resources are the shared clients a stage may use. A stage takes only what it
// needs in New; nil fields are not configured in this process.
type Resources struct {
	Postgres   *pgxpool.Pool
	ClickHouse driver.Conn
	Publisher  Publisher
	Logger     *slog.Logger
	Settings   map[string]string // stage-specific settings from the environment, by name
	// Mailer sends email through the transactional path (the journey
	// engine's send_email steps); nil when the root wiring gave none.
	Mailer Mailer
	// Contacts changes contacts as the contacts API does (the journey
	// engine's contact and list steps); nil when the root wiring gave none.
	Contacts ContactWriter
	// Clock is the time of the journey path (see Clock); nil is the real
	// clock. Only tests set it.
	Clock Clock
}

// Spec declares a stage: its unique name (the consumer group derives from it),
// the topic it reads, the topics Handle may publish to, its default config,
// and a constructor without side effects beyond what the stage needs.
//
// The envelopes Handle returns go to Produces[0] when Produces has one
// topic; a stage producing to several topics sets Route, which returns one
// of Produces for each envelope (a result outside Produces dead-letters the
// input envelope).
//
// FetchMinBytes, when set, lets the broker hold a fetch until that many
// bytes are waiting (or BatchFetchWait passed): fewer, larger fetches for a
// stage that buffers anyway (a Flusher writing batches), at the cost of up
// to BatchFetchWait of added latency when traffic is light. Zero fetches as
// soon as one record is there (an idle fetch returns after the runner's
// MaxWait). FetchMaxWait, when set, replaces both waits for this stage:
// with FetchMinBytes it bounds the added latency (BusyFetchWait: a stage
// that reads a busy topic for a few of its types, fetching a batch at a
// time instead of after every produce).
//
// UncheckedPayload is for a stage whose Handle parses env.Payload with a
// parser that refuses anything but exactly one valid JSON value: the runner
// then decodes envelopes with schemas.DecodeEnvelopeUnchecked and skips one
// pass over every payload. A payload such a parser refuses dead-letters the
// envelope, as Handle's errors do.
//
// Types, when not empty, are the envelope types Handle acts on: the
// runner reads each record's type header (set by Publish) and counts a
// record of any other type as finished at once, without decoding it or
// calling Handle. A record without the header is decoded and handled as
// before. Set it only when Handle returns nothing and does nothing for
// every other type: a topic's other consumers' types then cost a header
// comparison instead of a decode.
//
// Concurrency, when above 1, lets Handle run for up to that many envelopes
// of different keys at once (see Stage); each envelope's outputs are then
// published as soon as it is handled, and a Flusher's Flush may run while
// Handle calls are in progress (it must write what was buffered by the
// calls that returned before it began). 0 or 1: one envelope at a time, in
// batches, as before. MaxInFlight bounds the envelopes fetched and not yet
// finished (queued behind their key or being handled); when it is reached
// the stage stops fetching until one finishes (default
// DefaultInFlightPerWorker × Concurrency).
type Spec[C any] struct {
	Name             string
	Consumes         string
	Produces         []string
	Route            func(out schemas.Envelope) string
	Defaults         C
	New              func(ctx context.Context, r Resources, cfg C) (Stage, error)
	FetchMinBytes    int
	FetchMaxWait     time.Duration
	UncheckedPayload bool
	Types            []string
	Concurrency      int
	MaxInFlight      int
}

// DefaultInFlightPerWorker is the default MaxInFlight of a stage per unit
// of its Concurrency.
const DefaultInFlightPerWorker = 16

// Registered is the type-erased form of a Spec kept in the registry.
type Registered struct {
	Name             string
	Consumes         string
	Produces         []string
	Route            func(out schemas.Envelope) string // nil: Produces[0]
	Build            func(ctx context.Context, r Resources) (Stage, error)
	FetchMinBytes    int           // see Spec
	FetchMaxWait     time.Duration // see Spec; 0: the runner's MaxWait
	UncheckedPayload bool          // see Spec
	Types            []string      // see Spec; empty: every type
	Concurrency      int           // see Spec; 0 or 1: one envelope at a time
	MaxInFlight      int           // see Spec; 0: DefaultInFlightPerWorker × Concurrency
}

var (
	regMu    sync.Mutex
	registry = map[string]Registered{}
)

// Register adds a stage; call it from an init function. It panics on an empty
// or duplicate name, a missing topic or constructor, several Produces
// without a Route, or a negative Concurrency or MaxInFlight.
func Register[C any](s Spec[C]) {
	if s.Name == "" || s.Consumes == "" || s.New == nil {
		panic(fmt.Sprintf("pipeline: incomplete stage spec %q", s.Name))
	}
	if s.Concurrency < 0 || s.MaxInFlight < 0 {
		panic(fmt.Sprintf("pipeline: stage %q: negative Concurrency or MaxInFlight", s.Name))
	}
	if len(s.Produces) > 1 && s.Route == nil {
		panic(fmt.Sprintf("pipeline: stage %q produces to several topics but has no Route", s.Name))
	}
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[s.Name]; dup {
		panic("pipeline: duplicate stage " + s.Name)
	}
	registry[s.Name] = Registered{
		Name: s.Name, Consumes: s.Consumes, Produces: s.Produces, Route: s.Route,
		FetchMinBytes: s.FetchMinBytes, FetchMaxWait: s.FetchMaxWait, UncheckedPayload: s.UncheckedPayload, Types: s.Types,
		Concurrency: s.Concurrency, MaxInFlight: s.MaxInFlight,
		Build: func(ctx context.Context, r Resources) (Stage, error) {
			return s.New(ctx, r, s.Defaults)
		},
	}
}

// Stages returns every registered stage sorted by name.
func Stages() []Registered {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]Registered, 0, len(registry))
	for _, r := range registry {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the registered stage with that name.
func Lookup(name string) (Registered, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	r, ok := registry[name]
	return r, ok
}

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks an error that a retry cannot fix: the runner sends the
// envelope straight to the dead-letter topic.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

type unavailableError struct{ err error }

func (e unavailableError) Error() string { return e.err.Error() }
func (e unavailableError) Unwrap() error { return e.err }

// Unavailable marks an error saying that a dependency is down and the
// envelope had no effect yet (an SMTP relay that refused the connection, a
// Postgres that did not answer): nothing about the envelope is wrong, so
// the runner retries it with backoff (up to RunConfig.BackoffMax between
// tries) for as long as it takes, never dead-letters it for that, and does
// not count these tries against MaxRetries or env.Attempt. The envelope
// holds its key (and its partition's commit position) meanwhile; drain
// abandons it, to be read again. An error wrapping ErrBreakerOpen is
// treated the same way, waiting BackoffMax at once. Permanent wins over
// Unavailable.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return unavailableError{err}
}

// IsUnavailable reports whether err was marked with Unavailable.
func IsUnavailable(err error) bool {
	var u unavailableError
	return errors.As(err, &u)
}

// BatchFetchBytes is the FetchMinBytes of a stage that writes its rows in
// batches about once a FlushInterval (the ClickHouse sinks): the broker
// answers its fetches in large chunks rather than once per produce request
// of the ingest tier.
const BatchFetchBytes = 256 << 10

// BatchFetchWait is the longest a fetch of a stage with FetchMinBytes (and
// no FetchMaxWait) waits for them: a record waits at most this long, plus
// the stage's FlushInterval, before it is written when traffic is light.
const BatchFetchWait = 900 * time.Millisecond

// BusyFetchBytes and BusyFetchWait are the FetchMinBytes and FetchMaxWait
// of a stage that must act within a fraction of a second but reads a busy
// topic (every contact change) mostly to pass over other types: under load
// it fetches tens of kilobytes at a time instead of once per produce
// request (each fetch and its offset commit cost the broker and this
// process more than the records in it), and when traffic is light a record
// waits at most BusyFetchWait. The bytes only decide how much a fetch
// carries once the topic runs faster than BusyFetchBytes per BusyFetchWait
// (5 MB/s): below that every fetch waits out BusyFetchWait anyway, so a
// larger value costs no latency and saves fetches (256 KiB against 64 KiB:
// bench contacts server CPU per upsert 75.1 against 79.4 µs, 6 A/B pairs).
const (
	BusyFetchBytes = 256 << 10
	BusyFetchWait  = 50 * time.Millisecond
)
