package pipeline

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// counterValue reads a counter.
func counterValue(c prometheus.Counter) uint64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return uint64(m.GetCounter().GetValue())
}

// metricsText gathers reg (a *prometheus.Registry) in the text format.
func metricsText(t *testing.T, reg prometheus.Registerer) string {
	t.Helper()
	mfs, err := reg.(prometheus.Gatherer).Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

// Two runners (or producers) on one registerer share the families; a
// registerer holding another metric under a name the pipeline uses is a
// programming error.
func TestMetricsSharedPerRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := newRunnerMetrics(reg), newRunnerMetrics(reg)
	a.processed.WithLabelValues("x").Inc()
	b.processed.WithLabelValues("x").Add(2)
	a.handleSeconds.WithLabelValues("x").Observe(0.003)
	pa, pb := newProducerMetrics(reg), newProducerMetrics(reg)
	pa.messages.Inc()
	if pa.messages != pb.messages || counterValue(pb.messages) != 1 {
		t.Fatal("producers on one registerer must share their counters")
	}
	text := metricsText(t, reg)
	for _, want := range []string{
		"# HELP sendstream_stage_processed_total Envelopes handled successfully.\n# TYPE sendstream_stage_processed_total counter\n",
		`sendstream_stage_processed_total{stage="x"} 3`,
		`sendstream_stage_handle_seconds_bucket{stage="x",le="0.0025"} 0`,
		`sendstream_stage_handle_seconds_bucket{stage="x",le="0.005"} 1`,
		"# TYPE sendstream_producer_ack_seconds histogram",
		"sendstream_producer_messages_total 1",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}

	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "sendstream_producer_messages_total", Help: "x"}))
	defer func() {
		if recover() == nil {
			t.Fatal("a clashing metric must panic")
		}
	}()
	newProducerMetrics(clash)
}
