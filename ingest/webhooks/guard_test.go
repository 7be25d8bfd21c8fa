package webhooks_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"sendstream/ingest/webhooks"
)

// receiver is a local HTTP receiver that counts the requests it gets.
type receiver struct {
	*httptest.Server
	hits atomic.Int64
}

func newReceiver(t *testing.T, tlsOn bool, h http.HandlerFunc) *receiver {
	t.Helper()
	r := &receiver{}
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		if h != nil {
			h(w, req)
			return
		}
		w.WriteHeader(204)
	})
	if tlsOn {
		r.Server = httptest.NewTLSServer(wrapped)
	} else {
		r.Server = httptest.NewServer(wrapped)
	}
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) port() string {
	_, p, _ := net.SplitHostPort(r.Listener.Addr().String())
	return p
}

func get(c *fasthttp.Client, url string) (int, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url)
	req.Header.SetMethod("POST")
	req.SetBodyString(`{}`)
	err := c.DoTimeout(req, resp, 5*time.Second)
	return resp.StatusCode(), err
}

// TestDialRebinding: a name answers a public address when the target is
// checked, then 127.0.0.1 when the delivery connects. The subscribe-time
// check passes; the connection is refused by the dial-time guard and the
// receiver on loopback gets nothing.
func TestDialRebinding(t *testing.T) {
	dns := startDNS(t)
	dns.set("rebind.example.com", addrs("93.184.216.34"), addrs("127.0.0.1"))
	rcv := newReceiver(t, false, nil)
	g := webhooks.NewGuard(webhooks.GuardConfig{Resolver: dns.resolver()})
	url := "http://rebind.example.com:" + rcv.port() + "/hook"
	if err := checkTarget(g, url); err != nil {
		t.Fatalf("first lookup (public) refused: %v", err)
	}
	_, err := get(g.Client(webhooks.ClientConfig{}), url)
	if !errors.Is(err, webhooks.ErrPrivateAddress) {
		t.Fatalf("delivery after rebinding: got %v, want ErrPrivateAddress", err)
	}
	if n := rcv.hits.Load(); n != 0 {
		t.Fatalf("the loopback receiver got %d requests", n)
	}
	// net/http through DialContext is guarded the same way.
	hc := &http.Client{Transport: &http.Transport{DialContext: g.DialContext}}
	if _, err := hc.Post(url, "application/json", strings.NewReader(`{}`)); !errors.Is(err, webhooks.ErrPrivateAddress) {
		t.Fatalf("net/http after rebinding: got %v", err)
	}
	if n := rcv.hits.Load(); n != 0 {
		t.Fatalf("the loopback receiver got %d requests", n)
	}
}

// TestDialLiteralsAndAllowList: IP literals are checked at connect time
// too, and SENDSTREAM_WEBHOOK_ALLOW_PRIVATE's ranges let loopback through.
func TestDialLiteralsAndAllowList(t *testing.T) {
	rcv := newReceiver(t, false, nil)
	strict := webhooks.NewGuard(webhooks.GuardConfig{})
	for _, u := range []string{rcv.URL, "http://[::ffff:127.0.0.1]:" + rcv.port() + "/"} {
		if _, err := get(strict.Client(webhooks.ClientConfig{}), u); !errors.Is(err, webhooks.ErrPrivateAddress) {
			t.Errorf("%s without allow list: got %v", u, err)
		}
	}
	open := webhooks.NewGuard(webhooks.GuardConfig{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if st, err := get(open.Client(webhooks.ClientConfig{}), rcv.URL); err != nil || st != 204 {
		t.Fatalf("with 127.0.0.0/8 allowed: %d %v", st, err)
	}
	if n := rcv.hits.Load(); n != 1 {
		t.Fatalf("receiver got %d requests, want 1", n)
	}
}

// TestDialEachAddress: a name that resolves to several addresses has each
// one checked as it is dialled: the allowed one is tried (nothing listens
// there), the refused one, where the receiver listens, is never reached.
func TestDialEachAddress(t *testing.T) {
	dns := startDNS(t)
	dns.set("multi.example.com", addrs("127.0.0.2", "127.0.0.1"))
	rcv := newReceiver(t, false, nil)
	g := webhooks.NewGuard(webhooks.GuardConfig{Resolver: dns.resolver(),
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	if _, err := get(g.Client(webhooks.ClientConfig{}), "http://multi.example.com:"+rcv.port()+"/"); err == nil {
		t.Fatal("the request went through")
	}
	if n := rcv.hits.Load(); n != 0 {
		t.Fatalf("the receiver on the refused address got %d requests", n)
	}
	// With both allowed the dialer falls back to the listening one.
	g = webhooks.NewGuard(webhooks.GuardConfig{Resolver: dns.resolver(),
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if st, err := get(g.Client(webhooks.ClientConfig{}), "http://multi.example.com:"+rcv.port()+"/"); err != nil || st != 204 {
		t.Fatalf("both allowed: %d %v", st, err)
	}
}

// TestNoRedirects: a receiver's redirect (here to the metadata address and
// to another local server) is an answer, never followed.
func TestNoRedirects(t *testing.T) {
	inner := newReceiver(t, false, nil)
	for _, loc := range []string{"http://169.254.169.254/latest/meta-data/", inner.URL + "/"} {
		outer := newReceiver(t, false, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, loc, http.StatusTemporaryRedirect)
		})
		g := webhooks.NewGuard(webhooks.GuardConfig{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
		st, err := get(g.Client(webhooks.ClientConfig{}), outer.URL)
		if err != nil || st != 307 {
			t.Fatalf("redirect to %s: %d %v, want the 307 itself", loc, st, err)
		}
	}
	if n := inner.hits.Load(); n != 0 {
		t.Fatalf("the redirect was followed %d times", n)
	}
}

func TestInsecureTLS(t *testing.T) {
	rcv := newReceiver(t, true, nil)
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	g := webhooks.NewGuard(webhooks.GuardConfig{AllowPrivate: allow})
	if _, err := get(g.Client(webhooks.ClientConfig{}), rcv.URL); err == nil {
		t.Fatal("a self-signed certificate was accepted without InsecureTLS")
	}
	if st, err := get(g.Client(webhooks.ClientConfig{InsecureTLS: true}), rcv.URL); err != nil || st != 204 {
		t.Fatalf("InsecureTLS: %d %v", st, err)
	}
}

func TestErrIfPrivate(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "::ffff:127.0.0.1", "::1", "fc00::1", "fe80::1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "10.0.0.1", "192.168.0.1", "172.16.0.1"} {
		if err := webhooks.ErrIfPrivate(netip.MustParseAddr(s)); !errors.Is(err, webhooks.ErrPrivateAddress) {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"8.8.8.8", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8", "100.128.0.1", "172.32.0.1"} {
		if err := webhooks.ErrIfPrivate(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// The guard's dialer honours the context.
func TestDialContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g := webhooks.NewGuard(webhooks.GuardConfig{})
	if _, err := g.DialContext(ctx, "tcp", "8.8.8.8:443"); err == nil {
		t.Fatal("dialled with a cancelled context")
	}
	if _, err := g.DialContext(context.Background(), "udp", "8.8.8.8:53"); !errors.Is(err, webhooks.ErrPrivateAddress) {
		t.Fatalf("udp: %v", err)
	}
}
