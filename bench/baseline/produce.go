package baseline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// FROZEN: the produce baseline: 64 concurrent callers each publishing one
// ~200-byte envelope per call with acks=all to a fresh `sendstream broker`
// process, topic with 4 partitions (as serve creates them). It drives
// franz-go's kgo directly with fixed options (idempotent, acks=all, no
// compression, manual flushing) and its own group commit: one flusher
// flushes whatever is buffered, and again as soon as that flush returns.
// Nothing here calls the project's producer, topic creation or envelope
// encoder, so changing them cannot move this baseline (only a franz-go
// upgrade in go.mod can). The broker it talks to is the one the harness
// starts from the binary under test (-bin), as the system side's: shared
// infrastructure within a pair, like Postgres.

const (
	produceCallers    = 64
	producePartitions = 4
	produceTopic      = "bench.baseline.produce"
)

// produceEnvelope is the frozen record value: an envelope shaped as the
// pipeline's, encoded by encoding/json.
type produceEnvelope struct {
	ID         string          `json:"id"`
	Workspace  string          `json:"workspace"`
	Type       string          `json:"type"`
	Key        string          `json:"key"`
	OccurredAt time.Time       `json:"occurredAt"`
	Attempt    int             `json:"attempt"`
	Payload    json.RawMessage `json:"payload"`
}

func init() {
	register(&Baseline{
		Name:    "kafka-produce",
		Doc:     "group-commit produce (franz-go kgo, fixed options, acks=all, idempotent) of ~200-byte envelopes, 64 callers × 1 per call, fresh broker process",
		Unit:    "messages",
		Needs:   []Need{NeedBroker},
		Workers: produceCallers,
		Setup: func(ctx context.Context, env Env) (func(context.Context, int) (Op, error), func(), error) {
			if env.Brokers == "" {
				return nil, nil, fmt.Errorf("no broker (SENDSTREAM_KAFKA_BROKERS)")
			}
			brokers := strings.Split(env.Brokers, ",")
			cl, err := kgo.NewClient(
				kgo.SeedBrokers(brokers...),
				kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.ProducerBatchCompression(kgo.NoCompression()),
				kgo.ManualFlushing(),
				kgo.MaxBufferedRecords(16*produceCallers),
				kgo.DefaultProduceTopic(produceTopic),
			)
			if err != nil {
				return nil, nil, fmt.Errorf("kafka client: %w", err)
			}
			if err := createProduceTopic(ctx, cl); err != nil {
				cl.Close()
				return nil, nil, err
			}
			flushCtx, stop := context.WithCancel(context.Background())
			kick := make(chan struct{}, 1)
			flushed := make(chan struct{})
			go func() { // the group commit: one flush at a time, the next one right after
				defer close(flushed)
				for {
					select {
					case <-flushCtx.Done():
						return
					case <-kick:
					}
					_ = cl.Flush(flushCtx)
				}
			}()
			payload := json.RawMessage(`{"name":"purchase.completed","value":49.95}`)
			occurred := time.Unix(1700000000, 0).UTC()
			return func(_ context.Context, w int) (Op, error) {
					var n uint64
					prefix := "w" + strconv.Itoa(w) + "-"
					done := make(chan error, 1)
					promise := func(_ *kgo.Record, err error) { done <- err }
					return func(ctx context.Context) (int, error) {
						n++
						v, err := json.Marshal(produceEnvelope{
							ID: prefix + strconv.FormatUint(n, 10), Workspace: "ws_bench", Type: "event.recorded.v1",
							Key: "ws_bench/" + prefix + strconv.FormatUint(n%1000, 10), OccurredAt: occurred, Payload: payload,
						})
						if err != nil {
							return 0, fmt.Errorf("encode: %w", err)
						}
						rec := &kgo.Record{Key: []byte("ws_bench/" + prefix + strconv.FormatUint(n%1000, 10)), Value: v}
						cl.Produce(ctx, rec, promise)
						select {
						case kick <- struct{}{}:
						default:
						}
						select {
						case err := <-done:
							if err != nil {
								return 0, fmt.Errorf("produce: %w", err)
							}
							return 1, nil
						case <-ctx.Done(): // the promise still arrives; done is buffered
							return 0, ctx.Err()
						}
					}, nil
				}, func() {
					stop()
					<-flushed
					cl.Close()
				}, nil
		},
	})
}

// createProduceTopic creates the baseline's topic (replication 1) unless it
// exists.
func createProduceTopic(ctx context.Context, cl *kgo.Client) error {
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, producePartitions, 1, nil, produceTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", produceTopic, err)
	}
	return nil
}
