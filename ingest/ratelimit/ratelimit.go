// Package ratelimit counts calls per workspace, per endpoint, per minute in
// fixed windows aligned to the minute, exactly across every ingest process
// that shares one Postgres.
//
// Each window is one row in rate_windows. A process claims units with a single
// INSERT … ON CONFLICT DO UPDATE SET used = used + n RETURNING used; row locks
// serialise claims, so the grants of all processes together never exceed the
// limit.
//
//   - Small limits (below Options.LeaseThreshold per minute, default 2000)
//     claim one unit per call: exact, one Postgres round trip per allowed call.
//     Once a window is used up the process remembers it and answers 429
//     without Postgres until the minute ends.
//   - Large limits claim a lease of limit/LeaseDivisor units (default
//     limit/200) and serve it from memory, so at 50k calls/s Postgres sees a
//     few claims per second. Grants still never exceed the limit; the cost is
//     bounded over-reservation: a process may hold up to one unused lease
//     (0.5% of the limit) when the minute ends, so with P processes at most
//     P × limit/200 calls of a window may be refused early.
//
// Windows use the local clock (keep ingest hosts NTP-synchronised); rows of
// ended windows are deleted by Sweep.
package ratelimit

import (
	"context"
	_ "embed"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	//go:embed sql/claim.sql
	sqlClaim string
	//go:embed sql/sweep.sql
	sqlSweep string
)

// Claimer adds n units to a window's counter and returns the counter's new
// total. Postgres implements it; tests may use a fake.
type Claimer interface {
	Claim(ctx context.Context, workspace, endpoint string, window, n int64) (used int64, err error)
	Sweep(ctx context.Context, before int64) error
}

// Options tune a Limiter. Zero fields take the defaults.
type Options struct {
	LeaseThreshold int64            // limits at or above this lease units; default 2000
	LeaseDivisor   int64            // lease size = limit / LeaseDivisor; default 200
	Now            func() time.Time // default time.Now
}

// Limiter decides whether a call may proceed. Safe for concurrent use.
type Limiter struct {
	db     Claimer
	opt    Options
	seed   maphash.Seed
	shards [64]shard
}

type key struct{ ws, ep string }

type shard struct {
	mu sync.Mutex
	m  map[key]*state
}

// state is one (workspace, endpoint)'s view of its current window.
type state struct {
	mu        sync.Mutex
	window    int64 // unix minute
	avail     int64 // leased units not yet used
	exhausted bool  // the shared counter reached the limit in this window
}

// New returns a Limiter over Postgres (tables of schemas/postgres/0001_core.sql).
func New(pg *pgxpool.Pool, opt Options) *Limiter { return NewWith(pgClaimer{pg}, opt) }

// NewWith returns a Limiter over any Claimer.
func NewWith(db Claimer, opt Options) *Limiter {
	if opt.LeaseThreshold <= 0 {
		opt.LeaseThreshold = 2000
	}
	if opt.LeaseDivisor <= 0 {
		opt.LeaseDivisor = 200
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	l := &Limiter{db: db, opt: opt, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[key]*state)
	}
	return l
}

// Allow counts one call of workspace to endpoint against limit calls per
// minute and reports whether it may proceed. limit <= 0 always allows. An
// error means the shared counter could not be reached; the caller answers 503.
func (l *Limiter) Allow(ctx context.Context, workspace, endpoint string, limit int64) (bool, error) {
	return l.AllowAt(ctx, l.opt.Now(), workspace, endpoint, limit)
}

// AllowAt is Allow for a call made at now, for a caller that has read the
// clock already.
func (l *Limiter) AllowAt(ctx context.Context, now time.Time, workspace, endpoint string, limit int64) (bool, error) {
	if limit <= 0 {
		return true, nil
	}
	window := now.Unix() / 60
	st := l.state(workspace, endpoint)

	st.mu.Lock()
	if st.window != window {
		st.window, st.avail, st.exhausted = window, 0, false
	}
	if st.avail > 0 {
		st.avail--
		st.mu.Unlock()
		return true, nil
	}
	if st.exhausted {
		st.mu.Unlock()
		return false, nil
	}
	if limit < l.opt.LeaseThreshold {
		// Claim one unit without holding the lock: concurrent calls claim
		// concurrently and Postgres orders them.
		st.mu.Unlock()
		used, err := l.db.Claim(ctx, workspace, endpoint, window, 1)
		if err != nil {
			return false, err
		}
		if used >= limit {
			st.mu.Lock()
			if st.window == window {
				st.exhausted = true
			}
			st.mu.Unlock()
		}
		return used <= limit, nil
	}
	// Lease: hold the lock while claiming so one call claims for all.
	defer st.mu.Unlock()
	n := max(1, limit/l.opt.LeaseDivisor)
	used, err := l.db.Claim(ctx, workspace, endpoint, window, n)
	if err != nil {
		return false, err
	}
	granted := min(n, limit-(used-n))
	if used >= limit {
		st.exhausted = true
	}
	if granted <= 0 {
		return false, nil
	}
	st.avail = granted - 1
	return true, nil
}

func (l *Limiter) state(ws, ep string) *state {
	h := maphash.String(l.seed, ws) ^ (maphash.String(l.seed, ep) * 0x9E3779B97F4A7C15)
	sh := &l.shards[h%uint64(len(l.shards))]
	k := key{ws, ep}
	sh.mu.Lock()
	st := sh.m[k]
	if st == nil {
		st = &state{}
		sh.m[k] = st
	}
	sh.mu.Unlock()
	return st
}

// Sweep deletes the shared counters of windows that ended more than a minute
// ago and forgets local state of past windows. The server calls it about
// once a minute from one goroutine.
func (l *Limiter) Sweep(ctx context.Context) error {
	window := l.opt.Now().Unix() / 60
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k, st := range sh.m {
			st.mu.Lock()
			old := st.window < window
			st.mu.Unlock()
			if old {
				delete(sh.m, k)
			}
		}
		sh.mu.Unlock()
	}
	return l.db.Sweep(ctx, window-1)
}

type pgClaimer struct{ pg *pgxpool.Pool }

func (p pgClaimer) Claim(ctx context.Context, ws, ep string, window, n int64) (int64, error) {
	var used int64
	if err := p.pg.QueryRow(ctx, sqlClaim, ws, ep, window, n).Scan(&used); err != nil {
		return 0, fmt.Errorf("rate limit claim %s %s: %w", ws, ep, err)
	}
	return used, nil
}

func (p pgClaimer) Sweep(ctx context.Context, before int64) error {
	if _, err := p.pg.Exec(ctx, sqlSweep, before); err != nil {
		return fmt.Errorf("rate limit sweep: %w", err)
	}
	return nil
}
