package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sendstream/schemas"
)

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

// RunConfig configures Run. Zero values take the defaults noted.
type RunConfig struct {
	Brokers     []string     // required
	TopicPrefix string       // prepended to every topic
	Stages      []Registered // the stages to run (see SelectStages); required
	// Resources are passed to each stage's constructor; Resources.Publisher
	// is required: the runner publishes outputs and dead letters with it.
	Resources Resources

	MaxRetries  int           // retries of a retryable Handle error before dead-lettering (default 5)
	BackoffBase time.Duration // first retry delay, doubled per retry (default 100ms)
	BackoffMax  time.Duration // retry delay cap (default 10s)

	// A batch ends, and the stage is flushed, its outputs published and its
	// offsets committed, when BatchSize envelopes or BatchBytes of them
	// were handled, or FlushInterval passed since the first of them. For
	// stages without Flush a batch also ends as soon as no envelope is
	// waiting, so outputs leave without delay. Under load a flushing stage
	// thus flushes about once per FlushInterval: ClickHouse sinks insert
	// tens of thousands of rows at once (at 30k request-log rows/s, 10k-row
	// inserts cost ClickHouse twice the CPU of one insert per second).
	//
	// A stage with Concurrency > 1 publishes each envelope's outputs as it
	// is handled; if it is a Flusher it is flushed and committed on the
	// same three bounds, otherwise it commits when idle or once per
	// FlushInterval.
	BatchSize     int           // default 100000
	BatchBytes    int           // default 32 MiB of envelope bytes
	FlushInterval time.Duration // default 1s
	// DrainTimeout bounds the work done after ctx is cancelled: finishing
	// the envelope in hand, the last Flush, publish and commit (default 30s).
	DrainTimeout time.Duration

	// Consumer tuning; the defaults give low latency under light traffic
	// and quick group joins.
	//
	// MaxWait is the fetch long-poll on an idle partition (default 900ms;
	// a record arriving ends the wait at once unless the stage set
	// Spec.FetchMinBytes): a short MaxWait means many idle fetches.
	MaxWait          time.Duration
	SessionTimeout   time.Duration // default 10s (brokers refuse < 6s by default)
	RebalanceTimeout time.Duration // default 10s
	// HeartbeatInterval is the group heartbeat period (default 1s).
	HeartbeatInterval time.Duration
	// JoinGroupBackoff is the first wait before the consumer retries a
	// failed request, a group join among them; it doubles per try up to
	// five times this (default 500ms).
	JoinGroupBackoff time.Duration
	// PartitionWatchInterval is how often the consumer re-reads metadata,
	// which is how it sees partitions added to its topic (default 5s).
	PartitionWatchInterval time.Duration

	// Security is the TLS and SASL setting of the consumers (default
	// plaintext, no SASL); the Publisher has its own.
	Security KafkaSecurity

	// Metrics is where the sendstream_stage_* families are registered
	// (default prometheus.DefaultRegisterer, which the ingest tier's
	// /metrics serves); Runs sharing a registerer share the families.
	Metrics prometheus.Registerer
	Logger  *slog.Logger // default slog.Default()
}

func (c *RunConfig) withDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 5
	}
	if c.MaxRetries < 0 {
		c.MaxRetries = 0
	}
	def(&c.BackoffBase, 100*time.Millisecond)
	def(&c.BackoffMax, 10*time.Second)
	if c.BatchSize <= 0 {
		c.BatchSize = 100000
	}
	if c.BatchBytes <= 0 {
		c.BatchBytes = 32 << 20
	}
	def(&c.FlushInterval, time.Second)
	def(&c.DrainTimeout, 30*time.Second)
	def(&c.MaxWait, 900*time.Millisecond)
	def(&c.SessionTimeout, 10*time.Second)
	def(&c.RebalanceTimeout, 10*time.Second)
	def(&c.HeartbeatInterval, time.Second)
	def(&c.JoinGroupBackoff, 500*time.Millisecond)
	def(&c.PartitionWatchInterval, 5*time.Second)
	if c.Metrics == nil {
		c.Metrics = prometheus.DefaultRegisterer
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports a configuration Run cannot work with.
func (c RunConfig) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("run: no brokers configured")
	case len(c.Stages) == 0:
		return errors.New("run: no stages selected")
	case c.Resources.Publisher == nil:
		return errors.New("run: Resources.Publisher is required")
	}
	seen := map[string]bool{}
	for _, s := range c.Stages {
		if s.Name == "" || s.Consumes == "" || s.Build == nil {
			return fmt.Errorf("run: incomplete stage %q", s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("run: stage %q selected twice", s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// SelectStages returns the registered stages with these names, in the
// given order, or every registered stage when names is empty. Names may also
// be comma-separated lists, as in `sendstream worker --stages a,b`. An
// unknown name is an error listing the known ones.
func SelectStages(names ...string) ([]Registered, error) {
	var want []string
	for _, n := range names {
		for _, part := range strings.Split(n, ",") {
			if part = strings.TrimSpace(part); part != "" && !slices.Contains(want, part) {
				want = append(want, part)
			}
		}
	}
	if len(want) == 0 {
		return Stages(), nil
	}
	out := make([]Registered, 0, len(want))
	for _, n := range want {
		r, ok := Lookup(n)
		if !ok {
			known := make([]string, 0)
			for _, s := range Stages() {
				known = append(known, s.Name)
			}
			return nil, fmt.Errorf("unknown stage %q (registered: %s)", n, strings.Join(known, ", "))
		}
		out = append(out, r)
	}
	return out, nil
}

// GroupID returns the consumer group of a stage.
func GroupID(stage string) string { return "sendstream." + stage }

// Run builds the configured stages and runs one consumer-group reader per
// stage until ctx is cancelled, then drains: each stage stops fetching,
// finishes the envelope in hand, flushes, publishes and commits within
// DrainTimeout, and is closed. It returns an error when a stage cannot be
// built (the stages already built are closed) and otherwise the errors of
// the final drain and Close, if any. Topics must exist (see EnsureTopics).
//
// Per envelope: decode (undecodable records are dead-lettered), Handle with
// retries (exponential backoff, env.Attempt incremented; errors wrapping
// ErrBreakerOpen wait without using up retries), then dead-letter when
// Permanent or retries are exhausted. Per batch: Flush (retried), publish
// the outputs, commit the offsets of the handled envelopes. When Flush or a
// publish still fails, nothing is committed and the reader is reopened, so
// the batch is read again: at least once, never past an unfinished envelope.
// With Concurrency 0 or 1, envelopes are handled one at a time per stage,
// so a retry holds the stage (and keeps per-partition order); under
// sustained load outputs wait at most FlushInterval for their batch to end.
// With Concurrency N > 1 (keyed.go), up to N envelopes of different keys are
// handled at once and in order per key; each one's outputs are published
// as soon as it is handled, and each partition is committed only up to its
// first envelope still in flight (acks.go), so a retry or a slow envelope
// holds its key, and the commit position of its partition, but not the
// other keys; at most MaxInFlight envelopes are fetched and unfinished.
// On drain the keyed loop starts nothing more, waits for the running
// envelopes within DrainTimeout, and commits what finished.
func Run(ctx context.Context, cfg RunConfig) error {
	cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	runners := make([]*stageRunner, 0, len(cfg.Stages))
	closeAll := func() error {
		var errs []error
		for _, sr := range runners {
			if c, ok := sr.stage.(Closer); ok {
				if err := c.Close(); err != nil {
					errs = append(errs, fmt.Errorf("close stage %s: %w", sr.reg.Name, err))
				}
			}
		}
		return errors.Join(errs...)
	}
	for _, reg := range cfg.Stages {
		st, err := reg.Build(ctx, cfg.Resources)
		if err == nil && st == nil {
			err = errors.New("constructor returned no stage")
		}
		if err != nil {
			return errors.Join(fmt.Errorf("build stage %s: %w", reg.Name, err), closeAll())
		}
		runners = append(runners, newStageRunner(&cfg, reg, st))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(runners))
	for i, sr := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = sr.run(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, closeAll())...)
}

// stageRunner consumes one stage's topic.
type stageRunner struct {
	cfg     *RunConfig
	reg     Registered
	stage   Stage
	flusher Flusher // nil when the stage does not buffer
	topic   string  // full consumed topic
	log     *slog.Logger

	// The stage's series, resolved once in newStageRunner.
	processed, failed, retried, deadLettered prometheus.Counter
	flushes, flushFailures, commits          prometheus.Counter
	commitFailures, reopens                  prometheus.Counter
	lag                                      prometheus.Gauge
	flushSeconds, handleSeconds              durations
	calls                                    atomic.Uint64 // Handle calls, for sampling
}

// handleSample: one Handle call in this many is timed. Two clock reads
// and a histogram update per envelope cost more than many stages' Handle;
// the distribution survives sampling, and processed_total counts every
// call.
const handleSample = 8

func newStageRunner(cfg *RunConfig, reg Registered, st Stage) *stageRunner {
	m := newRunnerMetrics(cfg.Metrics)
	sr := &stageRunner{
		cfg:            cfg,
		reg:            reg,
		stage:          st,
		topic:          cfg.TopicPrefix + reg.Consumes,
		log:            cfg.Logger.With("stage", reg.Name),
		processed:      m.processed.WithLabelValues(reg.Name),
		failed:         m.failed.WithLabelValues(reg.Name),
		retried:        m.retried.WithLabelValues(reg.Name),
		deadLettered:   m.deadLettered.WithLabelValues(reg.Name),
		flushes:        m.flushes.WithLabelValues(reg.Name),
		flushFailures:  m.flushFailures.WithLabelValues(reg.Name),
		commits:        m.commits.WithLabelValues(reg.Name),
		commitFailures: m.commitFailures.WithLabelValues(reg.Name),
		reopens:        m.reopens.WithLabelValues(reg.Name),
		lag:            m.lag.WithLabelValues(reg.Name),
		flushSeconds:   durations{m.flushSeconds.WithLabelValues(reg.Name)},
		handleSeconds:  durations{m.handleSeconds.WithLabelValues(reg.Name)},
	}
	if f, ok := st.(Flusher); ok {
		sr.flusher = f
	}
	return sr
}

// newClient returns the stage's consumer-group client: franz-go's kgo,
// which took 40% of the CPU per record of kafka-go's Reader in the same
// bare consume-and-commit loop, so BenchmarkRun/flusher went from about
// 6.6 to 4.3-5.2 CPU-µs per envelope (in-process broker included).
// Offsets are committed only by complete. The balancers are kafka-go's
// defaults, so processes of releases that consumed with kafka-go can share

// run consumes until ctx is cancelled, reopening the reader with backoff
// after failures.
func (s *stageRunner) run(ctx context.Context) error {
	failures := 0
	consume := s.consume
	if s.reg.Concurrency > 1 {
		consume = s.consumeKeyed
	}
	for {
		err := consume(ctx)
		if ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("stage %s: drain: %w", s.reg.Name, err)
			}
			return nil
		}
		if err == nil { // not expected: consume returns nil only on ctx end
			failures = 0
			continue
		}
		failures++
		s.reopens.Inc()
		wait := backoff(failures-1, s.cfg.BackoffBase, s.cfg.BackoffMax)
		s.log.Error("stage failed; reopening reader", "err", err, "retryIn", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
	}
}
