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

// serveWithTimeout serves a trivial handler on loopback behind a
// timeoutListener and returns its address.
func serveWithTimeout(t *testing.T, timeout time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) { rc.SetBodyString("ok") }}
	go func() { _ = srv.Serve(newTimeoutListener(ln, timeout)) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
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
	addr := serveWithTimeout(t, timeout)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
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
	addr := serveWithTimeout(t, timeout)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
	addr := serveWithTimeout(t, timeout)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; i < 10; i++ {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		time.Sleep(timeout / 2)
	}
}
