package harness

import (
	"fmt"

	"sendstream/bench/load"
)

// evaluate compares the figures with the targets.
func (r *runner) evaluate() {
	rep, t := r.rep, r.b.Targets
	if len(rep.Pairs) > 0 {
		rep.check("pairs stable", fmt.Sprintf("%d pairs within 25%% of the baseline median", r.o.Pairs), float64(len(acceptedOf(rep.Pairs))), rep.Stable)
		if t.MinRatio > 0 {
			rep.check("ratio", fmt.Sprintf("≥ %g", t.MinRatio), rep.Ratio, rep.Ratio >= t.MinRatio)
		}
		if t.MinOpsPerSec > 0 {
			rep.check("system ops/s", fmt.Sprintf("≥ %g", t.MinOpsPerSec), rep.Median.SystemOpsPerSec, rep.Median.SystemOpsPerSec >= t.MinOpsPerSec)
		}
		if t.MaxCPUPerOpUs > 0 {
			c := rep.Median.SystemCPUUsPerOp["server+broker"]
			rep.check("cpu µs/op server+broker", fmt.Sprintf("≤ %g", t.MaxCPUPerOpUs), c, c > 0 && c <= t.MaxCPUPerOpUs)
		}
		var bad, all uint64
		for _, run := range rep.Runs {
			if run.Side == "system" && run.Load != nil {
				bad += run.Load.Non2xx + run.Load.Errors
				all += run.Load.Requests
			}
		}
		rate := 0.0
		if all > 0 {
			rate = float64(bad) / float64(all)
		}
		rep.check("system failed requests (closed loop)", "≤ 0.1%", rate*100, rate <= 0.001)
	}
	for i, o := range rep.OpenLoop {
		ol := r.b.OpenLoop[i]
		l := o.System.Latency
		if ol.P50Max > 0 {
			rep.latencyCheck("p50 ms at "+o.Label, ol.P50Max, l.P50Ms, o.Baseline, func(s load.Summary) float64 { return s.P50Ms })
		}
		if ol.P99Max > 0 {
			rep.latencyCheck("p99 ms at "+o.Label, ol.P99Max, l.P99Ms, o.Baseline, func(s load.Summary) float64 { return s.P99Ms })
		}
		if ol.RSSMaxMB > 0 {
			rep.check("rss MB at "+o.Label, fmt.Sprintf("≤ %g", ol.RSSMaxMB), o.RSSMaxMB, o.RSSMaxMB <= ol.RSSMaxMB)
		}
		if ol.DuringP99Max > 0 {
			p99, ok := 0.0, o.During != nil && o.During.Count > 0
			if ok {
				p99 = o.During.P99Ms
			}
			rep.check("end-to-end p99 ms at "+o.Label, fmt.Sprintf("≤ %g", load.Ms(ol.DuringP99Max)), p99, ok && p99 <= load.Ms(ol.DuringP99Max))
		}
		bad := float64(o.System.Non2xx + o.System.Errors)
		rate := 0.0
		if o.System.Requests > 0 {
			rate = bad / float64(o.System.Requests)
		}
		rep.check("failed requests at "+o.Label, "≤ 0.1%", rate*100, rate <= 0.001)
	}
	rep.Pass = true
	for _, c := range rep.Checks {
		rep.Pass = rep.Pass && c.Pass
	}
}
