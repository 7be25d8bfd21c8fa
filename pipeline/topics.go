package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnsureTopics creates prefix+topic for each topic that does not exist yet,
// with the given number of partitions (replication factor 1 for a single
// broker, 3 otherwise, capped by the broker count) and max.message.bytes
// of BrokerMessageMaxBytes, through kadm on a plaintext connection without
// SASL (the embedded broker, tests). Existing topics are left as they are
// (raise their max.message.bytes by hand when they were created smaller).
// A process with a Producer uses Producer.EnsureTopics, which applies its
// KafkaSecurity.
func EnsureTopics(ctx context.Context, brokers []string, prefix string, topics []string, partitions int) error {
	if len(brokers) == 0 {
		return errors.New("ensure topics: no brokers configured")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ClientID("sendstream-admin"))
	if err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	defer cl.Close()
	return createTopics(ctx, cl, prefixed(prefix, topics), partitions)
}

// EnsureTopics is the package's EnsureTopics through p's client (its
// brokers, TLS and SASL) and p's topic prefix.
func (p *Producer) EnsureTopics(ctx context.Context, topics []string, partitions int) error {
	return createTopics(ctx, p.cl, prefixed(p.cfg.TopicPrefix, topics), partitions)
}

func prefixed(prefix string, topics []string) []string {
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = prefix + t
	}
	return names
}

// topicConfig is set on every topic createTopics creates: messages up to
// BrokerMessageMaxBytes, so any envelope under MaxEnvelopeBytes fits
// whatever the broker's default.
func topicConfig() map[string]*string {
	v := strconv.Itoa(BrokerMessageMaxBytes)
	return map[string]*string{"max.message.bytes": &v}
}

// createTopics creates those of names that do not exist, with cl's admin
// API.
func createTopics(ctx context.Context, cl *kgo.Client, names []string, partitions int) error {
	if partitions <= 0 {
		partitions = 1
	}
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, names...)
	if err != nil {
		return fmt.Errorf("ensure topics: metadata: %w", err)
	}
	var missing []string
	for _, n := range names {
		if t, ok := md.Topics[n]; !ok || t.Err != nil || len(t.Partitions) == 0 {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	rf := min(3, len(md.Brokers))
	rf = max(rf, 1)
	res, err := adm.CreateTopics(ctx, int32(partitions), int16(rf), topicConfig(), missing...)
	if err != nil {
		return fmt.Errorf("ensure topics: create: %w", err)
	}
	for _, r := range res.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("ensure topics: create %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}
