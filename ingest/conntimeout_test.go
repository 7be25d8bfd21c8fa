package ingest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// dialWithTimeout serves a trivial handler on loopback behind a
// timeoutListener and returns a connection to it.
func dialWithTimeout(t *testing.T, timeout time.Duration) (net.Conn, *bufio.Reader) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) { rc.SetBodyString("ok") }}
	go func() { _ = srv.Serve(newTimeoutListener(ln, timeout)) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, bufio.NewReader(c)
}

// get sends one keep-alive request on c and checks the answer.
func get(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("answer %d %q", resp.StatusCode, body)
	}
}

// closedAfter reads from c until it is closed and returns how long that took.
func closedAfter(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("connection not closed by the server: %v", err)
	}
	return time.Since(start)
}

func TestTimeoutListenerClosesAnIdleKeepAliveConnection(t *testing.T) {
	const timeout = 800 * time.Millisecond
	c, br := dialWithTimeout(t, timeout)
	get(t, c, br)
	start := time.Now()
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("idle connection not closed: %v", err)
	}
	if d := time.Since(start); d < timeout*3/4-50*time.Millisecond || d > timeout+time.Second {
		t.Fatalf("idle connection closed after %s; want between 3/4 of %s and about %s", d, timeout, timeout)
	}
}

// TestTimeoutListenerBoundsASlowRequest: a client trickling a request's
// headers (slowloris) is cut off once the timeout passes; trickling does
// not extend it.
func TestTimeoutListenerBoundsASlowRequest(t *testing.T) {
	const timeout = 800 * time.Millisecond
	c, _ := dialWithTimeout(t, timeout)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
			return
		}
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := io.WriteString(c, "X-Slow: 1\r\n"); err != nil {
					return
				}
			}
		}
	}()
	if d := closedAfter(t, c); d > timeout+time.Second {
		t.Fatalf("a trickled request kept its connection for %s (timeout %s)", d, timeout)
	}
}

// TestTimeoutListenerKeepsABusyConnection: requests spaced by half the
// timeout, for several timeouts, all succeed on one connection: a response
// re-arms the deadline.
func TestTimeoutListenerKeepsABusyConnection(t *testing.T) {
	const timeout = 400 * time.Millisecond
	c, br := dialWithTimeout(t, timeout)
	for i := 0; i < 10; i++ {
		get(t, c, br)
		time.Sleep(timeout / 2)
	}
}
