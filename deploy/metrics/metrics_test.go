package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestRegisterSharesAndReplaceTakesOver(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "x_total", Help: "x"}
	a := Register(reg, prometheus.NewCounter(opts))
	b := Register(reg, prometheus.NewCounter(opts))
	if a != b {
		t.Fatal("a second registration must return the first counter")
	}

	g := func(v float64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "g", Help: "g", ConstLabels: prometheus.Labels{"n": "1"}}, func() float64 { return v })
	}
	Replace(reg, g(1))
	Replace(reg, g(2))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() == "g" {
			got = mf.GetMetric()
		}
	}
	if len(got) != 1 || got[0].GetGauge().GetValue() != 2 {
		t.Fatalf("gauge after Replace: %v", got)
	}

	defer func() {
		if recover() == nil {
			t.Fatal("a clashing metric must panic")
		}
	}()
	Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_total", Help: "x"}))
}
