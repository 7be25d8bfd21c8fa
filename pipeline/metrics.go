package pipeline

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sendstream/deploy/metrics"
)

// durations is a histogram of seconds.
type durations struct{ prometheus.Observer }

// ObserveSince records the seconds elapsed since t.
func (d durations) ObserveSince(t time.Time) { d.Observe(time.Since(t).Seconds()) }

// runnerMetrics are the families of the stage runner, labelled by stage.
type runnerMetrics struct {
	processed, failed, retried, deadLettered *prometheus.CounterVec
	flushes, flushFailures, commits          *prometheus.CounterVec
	commitFailures, reopens                  *prometheus.CounterVec
	lag                                      *prometheus.GaugeVec
	flushSeconds, handleSeconds              *prometheus.HistogramVec
}

func newRunnerMetrics(reg prometheus.Registerer) *runnerMetrics {
	stage := []string{"stage"}
	counter := func(name, help string) *prometheus.CounterVec {
		return metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, stage))
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: metrics.LatencyBuckets}, stage))
	}
	return &runnerMetrics{
		processed:      counter("sendstream_stage_processed_total", "Envelopes handled successfully."),
		failed:         counter("sendstream_stage_failed_total", "Handle calls that returned an error."),
		retried:        counter("sendstream_stage_retried_total", "Handle calls retried after a retryable error."),
		deadLettered:   counter("sendstream_stage_deadlettered_total", "Envelopes sent to the dead-letter topic."),
		flushes:        counter("sendstream_stage_flushes_total", "Flush calls."),
		flushFailures:  counter("sendstream_stage_flush_failures_total", "Flush calls that failed."),
		commits:        counter("sendstream_stage_commits_total", "Offset commits."),
		commitFailures: counter("sendstream_stage_commit_failures_total", "Offset commits that failed (the batch will be read again)."),
		reopens:        counter("sendstream_stage_reopens_total", "Times the reader was reopened after a failure."),
		lag: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sendstream_stage_lag",
			Help: "Messages behind the partition high-water marks, as of the last batch.",
		}, stage)),
		flushSeconds:  histogram("sendstream_stage_flush_seconds", "Duration of Flush calls."),
		handleSeconds: histogram("sendstream_stage_handle_seconds", "Duration of Handle calls, one call in "+strconv.Itoa(handleSample)+" sampled."),
	}
}

// producerMetrics are the Producer's series.
type producerMetrics struct {
	messages, errors, batches, retries prometheus.Counter
	ack, batchLen, request             prometheus.Histogram
}

func newProducerMetrics(reg prometheus.Registerer) producerMetrics {
	counter := func(name, help string) prometheus.Counter {
		return metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		return metrics.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
	}
	return producerMetrics{
		messages: counter("sendstream_producer_messages_total", "Envelopes acknowledged by the broker."),
		errors:   counter("sendstream_producer_errors_total", "Envelopes whose produce failed."),
		batches:  counter("sendstream_producer_batches_total", "Produce requests sent (group commits)."),
		retries:  counter("sendstream_producer_retries_total", "Produce requests that failed and whose records the client sends again."),
		ack:      histogram("sendstream_producer_ack_seconds", "Time from Publish to the broker's acknowledgement of all its envelopes.", metrics.LatencyBuckets),
		batchLen: histogram("sendstream_producer_batch_messages", "Envelopes per record batch (one partition's share of a produce request).",
			[]float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096}),
		request: histogram("sendstream_producer_request_seconds", "Round trip of one produce request (write, broker fsync, response).", metrics.LatencyBuckets),
	}
}
