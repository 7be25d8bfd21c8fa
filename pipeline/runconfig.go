package pipeline

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// This file holds Run's configuration and the selection of stages.

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
	// MaxTracked bounds, per reader of a stage with Concurrency > 1, the
	// records tracked for the commit position: those in flight and those
	// finished behind one still in flight (about 13 bytes each). When an
	// envelope stays in flight (a handler waiting on a dependency) while
	// the ones after it finish, the stage stops fetching at this bound
	// instead of growing without end (default 1<<20).
	MaxTracked int

	// Consumer tuning; the defaults give low latency under light traffic
	// and quick group joins.
	//
	// MaxWait is the fetch long-poll on an idle partition (default 5s, as
	// kgo's; a record arriving ends the wait at once unless the stage set
	// Spec.FetchMinBytes, and a rebalance or shutdown abandons it): a short
	// MaxWait means many idle fetches. A process runs about two dozen
	// stage readers, most of them on topics idle at any moment: at 900ms
	// their polls and heartbeats cost an idle server and its broker a few
	// percent of a core, and under load a few percent of throughput (bench
	// me, A/B).
	MaxWait          time.Duration
	SessionTimeout   time.Duration // default 10s (brokers refuse < 6s by default)
	RebalanceTimeout time.Duration // default 10s
	// HeartbeatInterval is the group heartbeat period (default 3s, Kafka's
	// and kgo's: a third of the session timeout). A member hears of a
	// rebalance on its next heartbeat.
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

// withDefaults fills the zero fields with their defaults.
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
	if c.MaxTracked <= 0 {
		c.MaxTracked = 1 << 20
	}
	def(&c.MaxWait, 5*time.Second)
	def(&c.SessionTimeout, 10*time.Second)
	def(&c.RebalanceTimeout, 10*time.Second)
	def(&c.HeartbeatInterval, 3*time.Second)
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
