// Package metrics holds what the packages that declare Prometheus metrics
// (the producer and stage runner in pipeline, the circuit breakers in
// sinks/breaker, the HTTP edge in ingest) share: registration that lets a
// second instance on one registerer share the series of the first, and the
// latency buckets. Each package declares its own metrics with client_golang;
// this leaf package imports nothing of ours.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// LatencyBuckets are the buckets of every duration histogram: seconds, from
// 100µs to 10s.
var LatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Register registers c with reg and returns it, or returns the collector
// already registered there with the same descriptors (a second Producer,
// Run, Server or breaker of the same name in one process), so both share
// its series. It panics when reg holds a different metric under the same
// name: that is a programming error, found at set-up.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		if prev, ok := dup.ExistingCollector.(C); ok {
			return prev
		}
	}
	panic(fmt.Sprintf("metrics: register: %v", err))
}

// Replace registers c with reg in place of a collector registered there
// with the same descriptors: a gauge read from a function of the newest
// instance (a breaker's state, a server's credential cache) takes over
// from an older one.
func Replace(reg prometheus.Registerer, c prometheus.Collector) {
	reg.Unregister(c)
	Register(reg, c)
}
