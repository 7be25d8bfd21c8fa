package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sendstream/schemas"
)

// This file holds the Kafka side of a stage, shared by both loops: the
// consumer-group client, the fetcher goroutine and the offset commit.

// newClient returns the stage's consumer-group client: franz-go's kgo,
// which took 40% of the CPU per record of kafka-go's Reader in the same
// bare consume-and-commit loop, so BenchmarkRun/flusher went from about
// 6.6 to 4.3-5.2 CPU-µs per envelope (in-process broker included).
// Offsets are committed only by complete. The balancers are kafka-go's
// defaults, so processes of releases that consumed with kafka-go can share
// the group during an upgrade.
func (s *stageRunner) newClient() (*kgo.Client, error) {
	c := s.cfg
	sec, err := c.Security.Opts()
	if err != nil {
		return nil, fmt.Errorf("stage %s: consumer: %w", s.reg.Name, err)
	}
	cl, err := kgo.NewClient(append(sec,
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
		kgo.FetchMaxWait(s.fetchMaxWait()),
		kgo.SessionTimeout(c.SessionTimeout),
		kgo.RebalanceTimeout(c.RebalanceTimeout),
		kgo.HeartbeatInterval(c.HeartbeatInterval),
		kgo.RetryBackoffFn(func(tries int) time.Duration { return backoff(tries-1, c.JoinGroupBackoff, 5*c.JoinGroupBackoff) }),
		kgo.MetadataMaxAge(c.PartitionWatchInterval),
		kgo.MaxConcurrentFetches(1),
		kgo.WithLogger(kgoLogger{s.log}),
	)...)
	if err != nil {
		return nil, fmt.Errorf("stage %s: consumer: %w", s.reg.Name, err)
	}
	return cl, nil
}

// fetchMaxWait is the stage's fetch long-poll: Spec.FetchMaxWait, else
// BatchFetchWait for a stage that set FetchMinBytes (a record must not wait
// for the idle poll), else the runner's MaxWait.
func (s *stageRunner) fetchMaxWait() time.Duration {
	switch {
	case s.reg.FetchMaxWait > 0:
		return s.reg.FetchMaxWait
	case s.reg.FetchMinBytes > 1:
		return min(BatchFetchWait, s.cfg.MaxWait)
	}
	return s.cfg.MaxWait
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
	skip      bool // a type the stage does not handle (Spec.Types): not decoded
}

// openReader opens one reader of the stage: a client, the context its
// work in hand runs under (it survives ctx's cancellation for DrainTimeout,
// so a drain can finish what was started), and the channel a fetcher
// goroutine feeds (so a loop can see whether a message is waiting without
// blocking, and wait for one or a deadline; the fetcher also decodes, in
// parallel with Handle). closeReader stops the fetcher, then the work
// context, then the client.
func (s *stageRunner) openReader(ctx context.Context) (cl *kgo.Client, workCtx context.Context, ch <-chan fetched, closeReader func(), err error) {
	cl, err = s.newClient()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	stopDrainTimer := context.AfterFunc(ctx, func() { time.AfterFunc(s.cfg.DrainTimeout, cancelWork) })
	fetchCtx, stopFetch := context.WithCancel(ctx)
	ch, fetcherDone := s.startFetcher(fetchCtx, cl)
	closeReader = func() {
		stopFetch()
		<-fetcherDone
		stopDrainTimer()
		cancelWork()
		cl.Close()
	}
	return cl, workCtx, ch, closeReader, nil
}

// startFetcher starts the goroutine that polls cl until ctx ends and sends
// each record, decoded, to the returned channel in fetch order; a fetch
// error that needs the client reopened is sent last. The second channel is
// closed when the goroutine has returned. The channel's buffer and kgo's
// one buffered fetch are all that is read ahead: when the loop stops
// receiving, fetching pauses.
func (s *stageRunner) startFetcher(ctx context.Context, cl *kgo.Client) (<-chan fetched, <-chan struct{}) {
	ch := make(chan fetched, 256)
	done := make(chan struct{})
	decode := schemas.DecodeEnvelope
	if s.reg.UncheckedPayload {
		decode = schemas.DecodeEnvelopeUnchecked
	}
	pass := passOver{want: typeSet(s.reg.Types), decode: decode}
	if ig, ok := s.stage.(Ignorer); ok {
		pass.ignore = ig.Ignores
	}
	if ig, ok := s.stage.(KindIgnorer); ok {
		pass.ignoreKind = ig.IgnoresKind
	}
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			for _, ft := range fs {
				for _, t := range ft.Topics {
					for _, part := range t.Partitions {
						if !forward(ctx, ch, part, &pass) {
							return
						}
					}
				}
			}
			if err := s.fetchError(fs); err != nil {
				select {
				case ch <- fetched{err: err}:
				case <-ctx.Done():
				}
				return
			}
		}
	}()
	return ch, done
}

// passOver decides which records a stage passes over undecoded: a type
// not in want (when want is not nil), or one ignoreKind reports it would do
// nothing with; other records are decoded, and passed over too when ignore
// says so. The funcs may be nil.
type passOver struct {
	want       map[string]struct{}
	decode     func([]byte, *schemas.Envelope) error
	ignore     func(*schemas.Envelope) bool
	ignoreKind func(typ, workspace string) bool
}

// read fills f from r: skip, or the decoded envelope (or its error).
func (p *passOver) read(r *kgo.Record, f *fetched) {
	typ, ws, hasType, hasWS := kindHeaders(r.Headers)
	if hasType && p.want != nil {
		if _, ok := p.want[string(typ)]; !ok {
			f.skip = true
			return
		}
	}
	if hasType && hasWS && p.ignoreKind != nil && p.ignoreKind(string(typ), string(ws)) {
		f.skip = true
		return
	}
	f.decodeErr = p.decode(f.m.Value, &f.env)
	f.skip = f.decodeErr == nil && p.ignore != nil && p.ignore(&f.env)
}

// forward reads the records of part (passOver.read) and sends them to ch
// in order. It returns false when ctx ended first.
func forward(ctx context.Context, ch chan<- fetched, part kgo.FetchPartition, p *passOver) bool {
	for _, r := range part.Records {
		f := fetched{m: message{
			Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset, LeaderEpoch: r.LeaderEpoch,
			HighWaterMark: part.HighWatermark, Key: r.Key, Value: r.Value,
		}}
		p.read(r, &f)
		select {
		case ch <- f:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// typeSet is types as a set, nil when empty (every type wanted).
func typeSet(types []string) map[string]struct{} {
	if len(types) == 0 {
		return nil
	}
	set := make(map[string]struct{}, len(types))
	for _, t := range types {
		set[t] = struct{}{}
	}
	return set
}

// kindHeaders returns the values of the type and workspace headers of a
// record (Publish's), and whether each was there.
func kindHeaders(hs []kgo.RecordHeader) (typ, ws []byte, hasType, hasWS bool) {
	for _, h := range hs {
		switch h.Key {
		case typeHeader:
			typ, hasType = h.Value, true
		case workspaceHeader:
			ws, hasWS = h.Value, true
		}
	}
	return typ, ws, hasType, hasWS
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
