package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listener hears the changes announced with Invalidate, by any process, and
// hands each to its subscribers (Cache.Evict). It holds one connection of
// its own, taken from the pool, in LISTEN on Channel. When that connection
// fails it reconnects with backoff and then tells subscribers ChangeAll,
// since notifications sent meanwhile were lost; until then the caches' TTL
// bounds staleness. One Listener per process serves every cache.
type Listener struct {
	pg  *pgxpool.Pool
	log *slog.Logger

	mu   sync.Mutex
	subs []func(Change)

	ready     chan struct{} // closed when the first LISTEN succeeded
	readyOnce sync.Once
	listening atomic.Bool
	pid       atomic.Uint32 // backend of the current connection (tests)
}

// Timing of the listener's connection.
const (
	// listenHeartbeat is how long the listener waits for a notification
	// before checking, with a round trip, that its connection still works
	// (a connection cut without a reset would otherwise go unnoticed).
	listenHeartbeat = 30 * time.Second
	listenPing      = 5 * time.Second
	minBackoff      = 50 * time.Millisecond
	maxBackoff      = 5 * time.Second
)

// NewListener returns a Listener on pg; Run starts it.
func NewListener(pg *pgxpool.Pool, log *slog.Logger) *Listener {
	if log == nil {
		log = slog.Default()
	}
	return &Listener{pg: pg, log: log, ready: make(chan struct{})}
}

// Subscribe adds fn, called with every Change heard, one at a time, on the
// listener's goroutine: fn must be quick and must not block. Safe to call
// at any time, before or after Run.
func (l *Listener) Subscribe(fn func(Change)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.subs = append(l.subs, fn)
}

func (l *Listener) dispatch(c Change) {
	l.mu.Lock()
	subs := l.subs
	l.mu.Unlock()
	for _, fn := range subs {
		fn(c)
	}
}

// Listening reports whether the listener's connection is in LISTEN now.
func (l *Listener) Listening() bool { return l.listening.Load() }

// WaitListening waits until the first LISTEN succeeded or ctx ends.
func (l *Listener) WaitListening(ctx context.Context) error {
	select {
	case <-l.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("credential invalidation listener not connected: %w", ctx.Err())
	}
}

// Run listens until ctx ends, reconnecting after every failure (backoff
// from 50 ms doubling to 5 s). It returns when ctx ends.
func (l *Listener) Run(ctx context.Context) {
	backoff := minBackoff
	for ctx.Err() == nil {
		listened, err := l.session(ctx)
		l.listening.Store(false)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = minBackoff
		}
		l.log.Warn("credential invalidation listener: connection lost; credential caches fall back to their TTL until it reconnects",
			"err", err, "retry_in", backoff.String())
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// session takes a connection out of the pool, listens on it and hands on
// what it hears until the connection fails or ctx ends. listened says
// whether LISTEN succeeded.
func (l *Listener) session(ctx context.Context) (listened bool, err error) {
	pc, err := l.pg.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire connection: %w", err)
	}
	conn := pc.Hijack() // the pool neither reuses nor counts it any more
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, sqlListen); err != nil {
		return false, fmt.Errorf("LISTEN %s: %w", Channel, err)
	}
	l.pid.Store(conn.PgConn().PID())
	// Whatever was cached may be stale: notifications sent before this
	// LISTEN (while disconnected, or before the first connection) were
	// never heard.
	l.dispatch(Change{Kind: ChangeAll})
	l.listening.Store(true)
	l.readyOnce.Do(func() { close(l.ready) })
	for {
		n, err := l.wait(ctx, conn)
		if err != nil {
			return true, err
		}
		if n == nil {
			continue
		}
		c, ok := parseChange(n.Payload)
		if !ok {
			l.log.Warn("credential invalidation listener: unknown payload; dropping every cached credential", "payload", n.Payload)
		}
		l.dispatch(c)
	}
}

// wait returns the next notification, or nil after a quiet heartbeat
// interval in which the connection answered a ping.
func (l *Listener) wait(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	wctx, cancel := context.WithTimeout(ctx, listenHeartbeat)
	n, err := conn.WaitForNotification(wctx)
	cancel()
	if err == nil {
		return n, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if !errors.Is(wctx.Err(), context.DeadlineExceeded) || conn.IsClosed() {
		return nil, fmt.Errorf("wait for notification: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, listenPing)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		return nil, fmt.Errorf("ping after %s without notifications: %w", listenHeartbeat, err)
	}
	return nil, nil
}
