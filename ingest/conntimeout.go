package ingest

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// timeoutListener enforces the connection timeout itself instead of
// fasthttp's ReadTimeout and IdleTimeout, which read the clock and move the
// read deadline twice per request. Each connection's read deadline is armed
// at the first read after a response (the next request, or keep-alive
// idleness, starts there) and only when fewer than three quarters of the
// timeout are left, against a clock that ticks every 100 ms. A request,
// with the idle time before it, therefore gets between 3/4 of the timeout
// and the timeout plus a tick to arrive in full; a client that stops
// sending mid-request cannot extend it, since only a response re-arms.
type timeoutListener struct {
	net.Listener
	timeout time.Duration
	now     atomic.Int64 // coarse Unix nanoseconds
	stop    chan struct{}
	once    sync.Once
}

const clockTick = 100 * time.Millisecond

func newTimeoutListener(ln net.Listener, timeout time.Duration) *timeoutListener {
	l := &timeoutListener{Listener: ln, timeout: timeout, stop: make(chan struct{})}
	l.now.Store(time.Now().UnixNano())
	go l.tick()
	return l
}

func (l *timeoutListener) tick() {
	t := time.NewTicker(clockTick)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			l.now.Store(now.UnixNano())
		case <-l.stop:
			return
		}
	}
}

// Accept wraps the next connection.
func (l *timeoutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &timeoutConn{Conn: c, l: l, idle: true}, nil
}

// Close stops the clock and closes the listener.
func (l *timeoutListener) Close() error {
	l.once.Do(func() { close(l.stop) })
	return l.Listener.Close()
}

// timeoutConn is one connection of a timeoutListener. fasthttp serves a
// connection from one goroutine at a time, so its fields need no lock.
type timeoutConn struct {
	net.Conn
	l        *timeoutListener
	idle     bool   // a response was written since the deadline was last considered
	deadline int64  // the armed read deadline, Unix nanoseconds
	ip       string // the remote IP as text, once asked for (remoteIP)
}

// Read arms the deadline when a new request may start, then reads.
func (c *timeoutConn) Read(p []byte) (int, error) {
	if c.idle {
		c.idle = false
		now := c.l.now.Load()
		if c.deadline-now < int64(c.l.timeout)*3/4 {
			c.deadline = now + int64(c.l.timeout) + int64(clockTick)
			if err := c.Conn.SetReadDeadline(time.Unix(0, c.deadline)); err != nil {
				return 0, err
			}
		}
	}
	return c.Conn.Read(p)
}

// Write marks the end of a response: the next read starts a new request.
func (c *timeoutConn) Write(p []byte) (int, error) {
	c.idle = true
	return c.Conn.Write(p)
}

// remoteIP returns the client address of rc as text, formatted once per
// connection when rc's connection came from a timeoutListener.
func remoteIP(rc *fasthttp.RequestCtx) string {
	if c, ok := rc.Conn().(*timeoutConn); ok {
		if c.ip == "" {
			c.ip = rc.RemoteIP().String()
		}
		return c.ip
	}
	return rc.RemoteIP().String()
}
