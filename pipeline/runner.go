package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

	Metrics *Registry    // default DefaultMetrics
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
		c.Metrics = DefaultMetrics
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
// Envelopes are handled one at a time per stage, so a retry holds the stage
// (and keeps per-partition order); under sustained load outputs wait at
// most FlushInterval for their batch to end.
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

	processed, failed, retried, deadLettered *Counter
	flushes, flushFailures, commits          *Counter
	commitFailures, reopens                  *Counter
	lag                                      *Gauge
	flushSeconds, handleSeconds              *Histogram
	calls                                    uint64 // Handle calls, for sampling; consume's goroutine only
}

// handleSample: one Handle call in this many is timed. Two clock reads
// and a histogram update per envelope cost more than many stages' Handle;
// the distribution survives sampling, and processed_total counts every
// call.
const handleSample = 8

func newStageRunner(cfg *RunConfig, reg Registered, st Stage) *stageRunner {
	m := cfg.Metrics
	for name, help := range map[string]string{
		"sendstream_stage_processed_total":       "Envelopes handled successfully.",
		"sendstream_stage_failed_total":          "Handle calls that returned an error.",
		"sendstream_stage_retried_total":         "Handle calls retried after a retryable error.",
		"sendstream_stage_deadlettered_total":    "Envelopes sent to the dead-letter topic.",
		"sendstream_stage_lag":                   "Messages behind the partition high-water marks, as of the last batch.",
		"sendstream_stage_flush_seconds":         "Duration of Flush calls.",
		"sendstream_stage_flushes_total":         "Flush calls.",
		"sendstream_stage_flush_failures_total":  "Flush calls that failed.",
		"sendstream_stage_commits_total":         "Offset commits.",
		"sendstream_stage_commit_failures_total": "Offset commits that failed (the batch will be read again).",
		"sendstream_stage_reopens_total":         "Times the reader was reopened after a failure.",
		"sendstream_stage_handle_seconds":        "Duration of Handle calls, one call in " + strconv.Itoa(handleSample) + " sampled.",
	} {
		m.Help(name, help)
	}
	l := []string{"stage", reg.Name}
	sr := &stageRunner{
		cfg:            cfg,
		reg:            reg,
		stage:          st,
		topic:          cfg.TopicPrefix + reg.Consumes,
		log:            cfg.Logger.With("stage", reg.Name),
		processed:      m.Counter("sendstream_stage_processed_total", l...),
		failed:         m.Counter("sendstream_stage_failed_total", l...),
		retried:        m.Counter("sendstream_stage_retried_total", l...),
		deadLettered:   m.Counter("sendstream_stage_deadlettered_total", l...),
		flushes:        m.Counter("sendstream_stage_flushes_total", l...),
		flushFailures:  m.Counter("sendstream_stage_flush_failures_total", l...),
		commits:        m.Counter("sendstream_stage_commits_total", l...),
		commitFailures: m.Counter("sendstream_stage_commit_failures_total", l...),
		reopens:        m.Counter("sendstream_stage_reopens_total", l...),
		lag:            m.Gauge("sendstream_stage_lag", l...),
		flushSeconds:   m.Histogram("sendstream_stage_flush_seconds", nil, l...),
		handleSeconds:  m.Histogram("sendstream_stage_handle_seconds", nil, l...),
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
// the group during an upgrade.
func (s *stageRunner) newClient() (*kgo.Client, error) {
	c := s.cfg
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID("sendstream-"+s.reg.Name),
		kgo.ConsumerGroup(GroupID(s.reg.Name)),
		kgo.ConsumeTopics(s.topic),
		kgo.Balancers(kgo.RangeBalancer(), kgo.RoundRobinBalancer()),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMinBytes(int32(max(s.reg.FetchMinBytes, 1))),
		kgo.FetchMaxBytes(10<<20),
		kgo.FetchMaxPartitionBytes(10<<20),
		kgo.FetchMaxWait(c.MaxWait),
		kgo.SessionTimeout(c.SessionTimeout),
		kgo.RebalanceTimeout(c.RebalanceTimeout),
		kgo.HeartbeatInterval(c.HeartbeatInterval),
		kgo.RetryBackoffFn(func(tries int) time.Duration { return backoff(tries-1, c.JoinGroupBackoff, 5*c.JoinGroupBackoff) }),
		kgo.MetadataMaxAge(c.PartitionWatchInterval),
		kgo.MaxConcurrentFetches(1),
		kgo.WithLogger(kgoLogger{s.log}),
	)
	if err != nil {
		return nil, fmt.Errorf("stage %s: consumer: %w", s.reg.Name, err)
	}
	return cl, nil
}

// kgoLogger passes the consumer client's warnings and errors to the log.
type kgoLogger struct{ log *slog.Logger }

func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level == kgo.LogLevelError {
		l.log.Error("kafka consumer: "+msg, keyvals...)
		return
	}
	l.log.Warn("kafka consumer: "+msg, keyvals...)
}

// run consumes until ctx is cancelled, reopening the reader with backoff
// after failures.
func (s *stageRunner) run(ctx context.Context) error {
	failures := 0
	for {
		err := s.consume(ctx)
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

// message is one consumed record.
type message struct {
	Topic         string
	Partition     int
	Offset        int64
	LeaderEpoch   int32
	HighWaterMark int64 // of the partition when the record was fetched
	Key, Value    []byte
}

type fetched struct {
	m         message
	env       schemas.Envelope
	decodeErr error
	err       error
}

// batch is what was handled since the last commit.
type batch struct {
	n       int
	bytes   int             // envelope bytes handled
	due     *time.Timer     // fires FlushInterval after the batch's first envelope
	last    map[int]message // last handled message per partition
	lag     map[int]int64
	outputs map[string][]schemas.Envelope
	topics  []string // output topics in first-use order
}

func (b *batch) reset() {
	b.n, b.bytes = 0, 0
	b.due.Stop()
	clear(b.last)
	clear(b.outputs)
	b.topics = b.topics[:0]
}

// errAbandoned reports that ctx ended while an envelope was still being
// retried: it is neither done nor dead-lettered and must be read again.
var errAbandoned = errors.New("envelope abandoned for drain")

// consume runs one reader until ctx ends (returns nil after draining) or a
// failure that needs the reader reopened (returns the error, with nothing
// after the last successful batch committed).
func (s *stageRunner) consume(ctx context.Context) error {
	cl, err := s.newClient()
	if err != nil {
		return err
	}
	defer cl.Close()

	// Work in hand survives ctx's cancellation for DrainTimeout.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopDrainTimer := context.AfterFunc(ctx, func() { time.AfterFunc(s.cfg.DrainTimeout, cancelWork) })
	defer stopDrainTimer()

	// A fetcher goroutine lets the loop see whether a message is waiting
	// without blocking, and wait for one or a flush deadline. It also
	// decodes, in parallel with Handle.
	fetchCtx, stopFetch := context.WithCancel(ctx)
	ch := make(chan fetched, 256)
	fetcherDone := make(chan struct{})
	decode := schemas.DecodeEnvelope
	if s.reg.UncheckedPayload {
		decode = schemas.DecodeEnvelopeUnchecked
	}
	go func() {
		defer close(fetcherDone)
		for {
			fs := cl.PollFetches(fetchCtx)
			if fetchCtx.Err() != nil {
				return
			}
			for _, ft := range fs {
				for _, t := range ft.Topics {
					for _, part := range t.Partitions {
						if !forward(fetchCtx, ch, part, decode) {
							return
						}
					}
				}
			}
			if err := s.fetchError(fs); err != nil {
				select {
				case ch <- fetched{err: err}:
				case <-fetchCtx.Done():
				}
				return
			}
		}
	}()
	defer func() { stopFetch(); <-fetcherDone }()

	// The batch's deadline is one timer armed by its first envelope, not a
	// clock read and a reset per envelope.
	b := &batch{last: map[int]message{}, lag: map[int]int64{}, outputs: map[string][]schemas.Envelope{},
		due: time.NewTimer(time.Hour)}
	b.due.Stop()
	defer b.due.Stop()

	for {
		if ctx.Err() != nil {
			return s.complete(workCtx, cl, b)
		}
		var f fetched
		got := true
		switch {
		case b.n == 0:
			select {
			case f = <-ch:
			case <-ctx.Done():
				return s.complete(workCtx, cl, b)
			}
		case s.flusher == nil:
			// The batch ends when nothing is waiting, or when a steady
			// stream has run for FlushInterval.
			select {
			case f = <-ch:
			case <-b.due.C:
				got = false
			default:
				got = false
			}
		default:
			select {
			case f = <-ch:
			case <-b.due.C: // FlushInterval is up
				got = false
			case <-ctx.Done():
				return s.complete(workCtx, cl, b)
			}
		}
		if !got {
			if err := s.complete(workCtx, cl, b); err != nil {
				return err
			}
			continue
		}
		if f.err != nil {
			if ctx.Err() != nil {
				return s.complete(workCtx, cl, b)
			}
			return errors.Join(fmt.Errorf("fetch %s: %w", s.topic, f.err), s.complete(workCtx, cl, b))
		}

		if err := s.handle(ctx, workCtx, b, &f); err != nil {
			// The envelope is unfinished: finish the batch before it, then
			// stop (drain) or reopen so it is read again.
			cerr := s.complete(workCtx, cl, b)
			if errors.Is(err, errAbandoned) {
				return cerr
			}
			return errors.Join(err, cerr)
		}
		b.lag[f.m.Partition] = max(f.m.HighWaterMark-f.m.Offset-1, 0)
		if b.n >= s.cfg.BatchSize || b.bytes >= s.cfg.BatchBytes {
			if err := s.complete(workCtx, cl, b); err != nil {
				return err
			}
		}
	}
}

// handle processes one message into b: decode, Handle with retries, route
// outputs, or dead-letter. It returns an error only when the message is not
// finished (abandoned for drain, or the dead-letter publish failed).
func (s *stageRunner) handle(ctx, workCtx context.Context, b *batch, f *fetched) error {
	m, env := f.m, f.env
	if err := f.decodeErr; err != nil {
		if derr := s.deadLetter(workCtx, m, nil, Permanent(fmt.Errorf("decode envelope: %w", err)), 0); derr != nil {
			return derr
		}
		s.done(b, m)
		return nil
	}
	attempts := 0
	for retries := 0; ; {
		timed := s.calls%handleSample == 0
		s.calls++
		var start time.Time
		if timed {
			start = time.Now()
		}
		outs, err := s.call(workCtx, env)
		if timed {
			s.handleSeconds.ObserveSince(start)
		}
		attempts++
		if err == nil {
			err = s.route(b, env, outs)
		}
		if err == nil {
			s.processed.Inc()
			s.done(b, m)
			return nil
		}
		s.failed.Inc()
		if workCtx.Err() != nil {
			return errAbandoned // drain deadline passed mid-Handle
		}
		breakerOpen := errors.Is(err, ErrBreakerOpen) && !IsPermanent(err)
		if IsPermanent(err) || (!breakerOpen && retries >= s.cfg.MaxRetries) {
			if derr := s.deadLetter(workCtx, m, &env, err, attempts); derr != nil {
				return derr
			}
			s.done(b, m)
			return nil
		}
		var wait time.Duration
		if breakerOpen {
			// The sink is known to be down: wait for it without using up
			// this envelope's retries.
			wait = s.cfg.BackoffMax
		} else {
			wait = backoff(retries, s.cfg.BackoffBase, s.cfg.BackoffMax)
			retries++
			env.Attempt++
		}
		s.retried.Inc()
		s.log.Warn("handle failed; retrying", "id", env.ID, "attempt", env.Attempt, "err", err, "retryIn", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return errAbandoned
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

// route files Handle's outputs under their topics, filling in ids, causation
// and trace context from the input. Nothing is filed when one is misrouted.
func (s *stageRunner) route(b *batch, in schemas.Envelope, outs []schemas.Envelope) error {
	if len(outs) == 0 {
		return nil
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
			return Permanent(fmt.Errorf("stage %s: output %d (%s) routed to %q, not one of its Produces %v", s.reg.Name, i, outs[i].Type, t, s.reg.Produces))
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
		if _, ok := b.outputs[topics[i]]; !ok {
			b.topics = append(b.topics, topics[i])
		}
		b.outputs[topics[i]] = append(b.outputs[topics[i]], out)
	}
	return nil
}

// done records m as finished in b.
func (s *stageRunner) done(b *batch, m message) {
	if b.n == 0 {
		b.due.Reset(s.cfg.FlushInterval)
	}
	b.n++
	b.bytes += len(m.Value)
	b.last[m.Partition] = m
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
	if err := s.publish(ctx, schemas.TopicDeadLetter, []schemas.Envelope{out}); err != nil {
		return fmt.Errorf("dead-letter %s: %w", out.ID, err)
	}
	s.deadLettered.Inc()
	return nil
}

// publish publishes envs, retrying retryable failures with backoff.
func (s *stageRunner) publish(ctx context.Context, topic string, envs []schemas.Envelope) error {
	for retries := 0; ; retries++ {
		err := s.cfg.Resources.Publisher.Publish(ctx, topic, envs...)
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

// complete ends the batch: Flush (retried), publish the outputs, commit the
// last handled offset of each partition. When Flush or a publish fails, it
// returns the error with nothing committed; the caller reopens the reader.
func (s *stageRunner) complete(ctx context.Context, cl *kgo.Client, b *batch) error {
	if b.n == 0 {
		return nil
	}
	if s.flusher != nil {
		if err := s.flush(ctx); err != nil {
			b.reset()
			return fmt.Errorf("flush: %w", err)
		}
	}
	for _, t := range b.topics {
		if err := s.publish(ctx, t, b.outputs[t]); err != nil {
			b.reset()
			return fmt.Errorf("publish outputs to %s: %w", t, err)
		}
	}
	offsets := make(map[int32]kgo.EpochOffset, len(b.last))
	for p, m := range b.last {
		offsets[int32(p)] = kgo.EpochOffset{Epoch: m.LeaderEpoch, Offset: m.Offset + 1}
	}
	var lag int64
	for _, l := range b.lag {
		lag += l
	}
	s.lag.Set(float64(lag))
	b.reset()
	if err := commit(ctx, cl, s.topic, offsets); err != nil {
		// Everything is durable; only the position is lost, so these
		// envelopes will be handled again after a rebalance or restart.
		s.commitFailures.Inc()
		s.log.Warn("commit failed", "err", err)
		return nil
	}
	s.commits.Inc()
	return nil
}

// flush calls Flush, retrying failures with backoff up to MaxRetries.
func (s *stageRunner) flush(ctx context.Context) error {
	for retries := 0; ; retries++ {
		start := time.Now()
		err := s.flusher.Flush(ctx)
		s.flushSeconds.ObserveSince(start)
		s.flushes.Inc()
		if err == nil {
			return nil
		}
		s.flushFailures.Inc()
		if IsPermanent(err) || retries >= s.cfg.MaxRetries || ctx.Err() != nil {
			return err
		}
		wait := backoff(retries, s.cfg.BackoffBase, s.cfg.BackoffMax)
		s.log.Warn("flush failed; retrying", "err", err, "retryIn", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
	}
}

// forward decodes the records of part and sends them to ch in order. It
// returns false when ctx ended first.
func forward(ctx context.Context, ch chan<- fetched, part kgo.FetchPartition, decode func([]byte, *schemas.Envelope) error) bool {
	for _, r := range part.Records {
		f := fetched{m: message{
			Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset, LeaderEpoch: r.LeaderEpoch,
			HighWaterMark: part.HighWatermark, Key: r.Key, Value: r.Value,
		}}
		f.decodeErr = decode(f.m.Value, &f.env)
		select {
		case ch <- f:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// fetchError returns the first error of fs that needs the client reopened.
// Data loss (records deleted before they were read; the client resumes at
// the earliest offset left) is only logged.
func (s *stageRunner) fetchError(fs kgo.Fetches) error {
	var first error
	fs.EachError(func(topic string, partition int32, err error) {
		var loss *kgo.ErrDataLoss
		if errors.As(err, &loss) {
			s.log.Warn("kafka consumer: records lost before they were read", "topic", topic, "partition", partition, "err", err)
			return
		}
		if first == nil {
			first = fmt.Errorf("partition %d: %w", partition, err)
		}
	})
	return first
}

// commit commits offsets (the next offset to read, per partition) of topic
// for the client's group and waits for the answer.
func commit(ctx context.Context, cl *kgo.Client, topic string, offsets map[int32]kgo.EpochOffset) error {
	var cerr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, res *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				return
			}
			for _, t := range res.Topics {
				for _, p := range t.Partitions {
					if e := kerr.ErrorForCode(p.ErrorCode); e != nil && cerr == nil {
						cerr = fmt.Errorf("partition %d: %w", p.Partition, e)
					}
				}
			}
		})
	return cerr
}
