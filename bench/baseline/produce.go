package baseline

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sendstream/pipeline"
	"sendstream/schemas"
)

// FROZEN: the produce baseline: 64 concurrent callers each publishing one
// ~200-byte envelope per call with acks=all through the group-commit
// producer (pipeline.NewProducer, compression none) to a fresh
// `sendstream broker` process, topic with 4 partitions (as serve creates
// them). The calling code here is frozen; the producer it drives is the
// system's own (the floor every ingest path pays), so a faster producer
// raises this ceiling and the systems' throughput alike.

const (
	produceCallers    = 64
	producePartitions = 4
	produceTopic      = "bench.baseline.produce"
)

func init() {
	register(&Baseline{
		Name:    "kafka-produce",
		Doc:     "group-commit produce (pipeline.Producer, acks=all) of ~200-byte envelopes, 64 callers × 1 per call, fresh broker process",
		Unit:    "messages",
		Needs:   []Need{NeedBroker},
		Workers: produceCallers,
		Setup: func(ctx context.Context, env Env) (func(context.Context, int) (Op, error), func(), error) {
			if env.Brokers == "" {
				return nil, nil, fmt.Errorf("no broker (SENDSTREAM_KAFKA_BROKERS)")
			}
			brokers := strings.Split(env.Brokers, ",")
			if err := pipeline.EnsureTopics(ctx, brokers, "", []string{produceTopic}, producePartitions); err != nil {
				return nil, nil, fmt.Errorf("create topic: %w", err)
			}
			p, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: brokers, Compression: "none"})
			if err != nil {
				return nil, nil, fmt.Errorf("producer: %w", err)
			}
			payload := json.RawMessage(`{"name":"purchase.completed","value":49.95}`)
			return func(_ context.Context, w int) (Op, error) {
				var n uint64
				prefix := "w" + strconv.Itoa(w) + "-"
				return func(ctx context.Context) (int, error) {
					n++
					env := schemas.Envelope{
						ID:         prefix + strconv.FormatUint(n, 10),
						Workspace:  "ws_bench",
						Type:       "event.recorded.v1",
						Key:        "ws_bench/" + prefix + strconv.FormatUint(n%1000, 10),
						OccurredAt: time.Unix(1700000000, 0).UTC(),
						Payload:    payload,
					}
					if err := p.Publish(ctx, produceTopic, env); err != nil {
						return 0, fmt.Errorf("publish: %w", err)
					}
					return 1, nil
				}, nil
			}, func() { _ = p.Close() }, nil
		},
	})
}
