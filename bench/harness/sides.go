package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"sendstream/bench/baseline"
	"sendstream/bench/load"
)

// side is one thing measured in a pair: a baseline or the system.
type side struct {
	name   string
	http   bool
	req    *load.Request
	client *fasthttp.HostClient
	pids   map[string]int
	settle []int
	proc   *Process // HTTP baseline server
}

func (r *runner) startBaselines(ctx context.Context) error {
	for _, name := range r.b.Baselines {
		bl, err := baseline.Get(name)
		if err != nil {
			return err
		}
		sd := &side{name: name, http: bl.IsHTTP()}
		if bl.IsHTTP() {
			p, url, err := StartBaselineServer(ctx, r.o.Self, name, r.dir, r.o.ServerProcs)
			if err != nil {
				return err
			}
			r.procs = append(r.procs, p)
			sd.proc = p
			sd.req = bl.Request(url)
			if sd.client, err = client(sd.req, r.conns); err != nil {
				return err
			}
			sd.pids = map[string]int{"server": p.PID(), "generator": 0}
			sd.settle = []int{p.PID()}
		} else {
			for _, n := range bl.Needs {
				if (n == baseline.NeedPostgres && r.o.Stack.PostgresURL == "") || (n == baseline.NeedClickHouse && r.o.Stack.ClickHouseAddr == "") {
					return fmt.Errorf("baseline %s needs %s: %v", name, n, r.o.Stack.Missing())
				}
				if n == baseline.NeedBroker && r.o.Bin == "" {
					return fmt.Errorf("baseline %s needs a broker (bin/sendstream broker): %v", name, r.o.BuildErr)
				}
			}
		}
		r.bases = append(r.bases, sd)
	}
	return nil
}

func client(req *load.Request, conns int) (*fasthttp.HostClient, error) {
	addr, err := req.Addr()
	if err != nil {
		return nil, err
	}
	return load.NewClient(addr, conns), nil
}

func (r *runner) startSystem(ctx context.Context) error {
	sd := &side{name: r.b.Name, http: true}
	if r.b.SelfTest {
		name := r.b.Baselines[0]
		bl, _ := baseline.Get(name)
		p, url, err := StartBaselineServer(ctx, r.o.Self, name, r.dir, r.o.ServerProcs)
		if err != nil {
			return err
		}
		r.procs = append(r.procs, p)
		r.s = &System{Root: r.o.Root, Dir: r.dir, BaseURL: url, Server: p, ServerProcs: r.o.ServerProcs}
		sd.req = bl.Request(url)
	} else {
		var env []string
		if r.b.Prepare != nil {
			var cleanup func()
			var err error
			if env, cleanup, err = r.b.Prepare(ctx, r.dir); err != nil {
				return fmt.Errorf("prepare %s: %w", r.b.Name, err)
			}
			r.cleanup = cleanup
		}
		r.logf("%s: starting a fresh broker and sendstream serve (GOMAXPROCS=%d)", r.b.Name, r.o.ServerProcs)
		s, err := StartSystem(ctx, r.o.Root, r.o.Bin, r.dir, r.o.Stack, r.o.ServerProcs, env...)
		if err != nil {
			return err
		}
		r.s = s
		r.logf("%s: server %s (pid %d), broker %s (pid %d), workspace %s", r.b.Name, s.BaseURL, s.Server.PID(), s.BrokerAddr, s.Broker.PID(), s.WorkspaceID)
		if r.b.Setup != nil {
			if err := r.b.Setup(ctx, s); err != nil {
				return fmt.Errorf("set up %s: %w", r.b.Name, err)
			}
		}
		sd.req = r.b.Request(s)
	}
	var err error
	if sd.client, err = client(sd.req, r.conns); err != nil {
		return err
	}
	sd.pids = r.s.PIDs()
	for role, pid := range sd.pids {
		if role != "generator" {
			sd.settle = append(sd.settle, pid)
		}
	}
	r.sys = sd
	return nil
}

// probe sends one request to the system: a 404 or 405 means the endpoint
// does not exist yet (skip); any other non-2xx is an error worth seeing
// before spending minutes on it.
func (r *runner) probe(ctx context.Context) error {
	res, err := load.Closed(ctx, r.sys.client, r.sys.req, 1, load.Window{Duration: 200 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("probe %s: %w", r.sys.req.URL, err)
	}
	if res.OK > 0 && res.Non2xx == 0 && res.Errors == 0 {
		return nil
	}
	if res.Statuses[404] > 0 || res.Statuses[405] > 0 {
		return fmt.Errorf("%w: %s %s answers %s", ErrSkip, r.sys.req.Method, r.sys.req.URL, res.FirstFailure)
	}
	return fmt.Errorf("probe %s %s: %s", r.sys.req.Method, r.sys.req.URL, res.FirstFailure)
}
