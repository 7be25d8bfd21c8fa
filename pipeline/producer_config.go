package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// This file holds the Producer's configuration and the envelope size limits.

// MaxEnvelopeBytes is the largest encoded envelope a Producer publishes by
// default (ProducerConfig.MaxEnvelopeBytes). It is sized so that whatever an
// accepted request puts in an envelope fits: the largest body cap of the
// HTTP edge is 16 MiB (spec 8.2), and a payload may be somewhat larger than
// the body it came from (Postgres renders stored JSON with a space after
// every ':' and ','). Handlers that could produce more check that before
// they store anything.
const MaxEnvelopeBytes = 64 << 20

// BrokerMessageMaxBytes is the broker's message.max.bytes (and a topic's
// max.message.bytes) that MaxEnvelopeBytes needs: one envelope in a record
// batch of its own, with the batch and record headers and the key.
const BrokerMessageMaxBytes = MaxEnvelopeBytes + 64<<10

// ProducerConfig configures a Producer. Zero values take the defaults noted
// on each field.
type ProducerConfig struct {
	Brokers     []string // host:port of one or more brokers; required
	TopicPrefix string   // prepended to every topic passed to Publish
	// Security is the TLS and SASL setting of the connections (default
	// plaintext, no SASL).
	Security KafkaSecurity
	// Compression of produce requests: "none" (default), "snappy", "lz4",
	// "zstd" or "gzip". On loopback "none" is fastest (see BenchmarkPublish).
	Compression string
	ClientID    string // default "sendstream"
	// RequestTimeout bounds one produce round trip (default 10s).
	RequestTimeout time.Duration
	// MaxAttempts bounds how often a record is sent when the broker or the
	// connection fails with a retryable error (default 3); the client
	// retries within MaxAttempts·RequestTimeout, and longer while a request
	// with the record is out and its outcome unknown (idempotence).
	MaxAttempts int
	// MaxBatchBytes caps one partition's record batch (default
	// BrokerMessageMaxBytes, what the topics EnsureTopics creates accept).
	// Lower it for topics created with a smaller max.message.bytes; it must
	// stay above MaxEnvelopeBytes plus batch overhead.
	MaxBatchBytes int
	// MaxEnvelopeBytes caps one encoded envelope (default MaxEnvelopeBytes);
	// the broker and its topics must accept messages of this size plus
	// batch overhead (BrokerMessageMaxBytes). A larger envelope is refused
	// with a Permanent error before anything is sent.
	MaxEnvelopeBytes int
	// MaxBufferedRecords bounds the envelopes queued and in flight; Publish
	// waits (within its ctx) while the bound is reached (default 100000).
	MaxBufferedRecords int
	// MetadataTTL is how often partition leaders and counts are re-read
	// (default 10s; at least 1s). A leader that moved is found at once
	// from the broker's answer.
	MetadataTTL time.Duration
	// AutoCreatePartitions, when positive, makes Publish create a missing
	// topic with that many partitions (as EnsureTopics does) instead of
	// failing.
	AutoCreatePartitions int
	// Metrics is where the sendstream_producer_* series are registered
	// (default prometheus.DefaultRegisterer); Producers sharing a
	// registerer share the series.
	Metrics prometheus.Registerer
}

func (c *ProducerConfig) withDefaults() {
	if c.Compression == "" {
		c.Compression = "none"
	}
	if c.ClientID == "" {
		c.ClientID = "sendstream"
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 3
	}
	if c.MaxEnvelopeBytes <= 0 {
		c.MaxEnvelopeBytes = MaxEnvelopeBytes
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = max(BrokerMessageMaxBytes, c.MaxEnvelopeBytes+64<<10)
	}
	if c.MaxBufferedRecords <= 0 {
		c.MaxBufferedRecords = 100000
	}
	if c.MetadataTTL <= 0 {
		c.MetadataTTL = 10 * time.Second
	}
	c.MetadataTTL = max(c.MetadataTTL, time.Second)
	if c.Metrics == nil {
		c.Metrics = prometheus.DefaultRegisterer
	}
}

// Validate reports a configuration that cannot work.
func (c ProducerConfig) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("producer: no brokers configured")
	}
	if _, err := parseCompression(c.Compression); err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	if err := c.Security.Validate(); err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	return nil
}

func parseCompression(s string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(s) {
	case "", "none":
		return kgo.NoCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown compression %q (want none, snappy, lz4, zstd or gzip)", s)
}
