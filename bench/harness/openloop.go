package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"sendstream/bench/load"
	"sendstream/bench/proc"
)

// openLoop measures the system at a fixed rate (latency from intended send
// times, RSS, CPU), then the first HTTP baseline at the same rate.
func (r *runner) openLoop(ctx context.Context, ol OpenLoop) error {
	sd := r.sys
	req := sd.req
	if ol.Request != nil && !r.b.SelfTest {
		req = ol.Request(r.s)
	}
	out := OpenLoopRun{Label: ol.Label(), Rate: ol.Rate}
	all := r.settlePIDs()
	settle(ctx, all, 5*time.Second)
	serverPID := r.s.Server.PID()
	idle, _ := proc.RSS(serverPID)
	out.RSSIdleMB = mb(idle)
	maxRSS := idle
	stopRSS := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopRSS:
				return
			case <-t.C:
				if v, err := proc.RSS(serverPID); err == nil && v > maxRSS {
					maxRSS = v
				}
			}
		}
	}()
	cl, err := client(req, ol.inFlight())
	if err != nil {
		return err
	}
	meter := &proc.Meter{PIDs: sd.pids, Commands: stackCommands}
	var during *load.Histogram
	var duringErr error
	duringCtx, endDuring := context.WithCancel(ctx)
	defer endDuring()
	start := func() {
		meter.Start()
		if ol.During != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				during, duringErr = ol.During(duringCtx, r.s)
			}()
		}
	}
	end := func() {
		meter.End()
		endDuring()
	}
	res, err := load.Open(ctx, cl, req, ol.Rate, ol.inFlight(), load.Window{
		Warmup: r.o.Warmup, Duration: r.o.Duration, OnStart: start, OnEnd: end})
	endDuring()
	close(stopRSS)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("open loop %s: %w", ol.Label(), err)
	}
	if duringErr != nil {
		return fmt.Errorf("open loop %s: during: %w", ol.Label(), duringErr)
	}
	if during != nil {
		d := during.Summary()
		out.During = &d
		r.logf("%s: open loop %s: end to end p50 %.2f p99 %.2f ms over %d markers", r.b.Name, ol.Label(), d.P50Ms, d.P99Ms, d.Count)
	}
	out.System = res
	out.CPUUsPerOp = meter.PerOp(float64(res.OK) * float64(req.Ops()))
	if s, ok := out.CPUUsPerOp["server"]; ok {
		out.CPUUsPerOp["server+broker"] = round3(s + out.CPUUsPerOp["broker"])
	}
	out.RSSMaxMB, out.RSSAddedMB = mb(maxRSS), mb(maxRSS-idle)
	r.logf("%s: open loop %s: p50 %.2f p99 %.2f p999 %.2f ms, %d ok, %d failed, rss %.0f MB (+%.0f)", r.b.Name, ol.Label(),
		res.Latency.P50Ms, res.Latency.P99Ms, res.Latency.P999Ms, res.OK, res.Non2xx+res.Errors, out.RSSMaxMB, out.RSSAddedMB)
	if !ol.NoBaseline && len(r.bases) > 0 && r.bases[0].http {
		bs := r.bases[0]
		settle(ctx, all, 5*time.Second)
		bcl, err := client(bs.req, ol.inFlight())
		if err != nil {
			return err
		}
		bres, err := load.Open(ctx, bcl, bs.req, ol.Rate, ol.inFlight(), load.Window{Warmup: r.o.Warmup, Duration: r.o.Duration})
		if err != nil {
			return fmt.Errorf("open loop %s on %s: %w", ol.Label(), bs.name, err)
		}
		out.Baseline = bres
		r.logf("%s: open loop %s on %s: p50 %.2f p99 %.2f p999 %.2f ms", r.b.Name, ol.Label(), bs.name,
			bres.Latency.P50Ms, bres.Latency.P99Ms, bres.Latency.P999Ms)
	}
	r.rep.OpenLoop = append(r.rep.OpenLoop, out)
	return nil
}
