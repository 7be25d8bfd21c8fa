package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"sendstream/sinks/webhook"
	"sendstream/sinks/webhook/webhooktest"
)

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
	dns := webhooktest.StartDNS(t)
	dns.Set("rebind.example.com", webhooktest.Addrs("93.184.216.34"), webhooktest.Addrs("127.0.0.1"))
	rcv := webhooktest.NewReceiver(t, false, nil)
	g := webhook.NewGuard(webhook.GuardConfig{Resolver: dns.Resolver()})
	url := "http://rebind.example.com:" + rcv.Port() + "/hook"
	if err := checkTarget(g, url); err != nil {
		t.Fatalf("first lookup (public) refused: %v", err)
	}
	_, err := get(g.Client(webhook.ClientConfig{}), url)
	if !errors.Is(err, webhook.ErrPrivateAddress) {
		t.Fatalf("delivery after rebinding: got %v, want ErrPrivateAddress", err)
	}
	if n := rcv.Hits.Load(); n != 0 {
		t.Fatalf("the loopback receiver got %d requests", n)
	}
	// net/http through DialContext is guarded the same way.
	hc := &http.Client{Transport: &http.Transport{DialContext: g.DialContext}}
	if _, err := hc.Post(url, "application/json", strings.NewReader(`{}`)); !errors.Is(err, webhook.ErrPrivateAddress) {
		t.Fatalf("net/http after rebinding: got %v", err)
	}
	if n := rcv.Hits.Load(); n != 0 {
		t.Fatalf("the loopback receiver got %d requests", n)
	}
}

// TestDialLiteralsAndAllowList: IP literals are checked at connect time
// too, and SENDSTREAM_WEBHOOK_ALLOW_PRIVATE's ranges let loopback through.
func TestDialLiteralsAndAllowList(t *testing.T) {
	rcv := webhooktest.NewReceiver(t, false, nil)
	strict := webhook.NewGuard(webhook.GuardConfig{})
	for _, u := range []string{rcv.URL, "http://[::ffff:127.0.0.1]:" + rcv.Port() + "/"} {
		if _, err := get(strict.Client(webhook.ClientConfig{}), u); !errors.Is(err, webhook.ErrPrivateAddress) {
			t.Errorf("%s without allow list: got %v", u, err)
		}
	}
	open := webhook.NewGuard(webhook.GuardConfig{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if st, err := get(open.Client(webhook.ClientConfig{}), rcv.URL); err != nil || st != 204 {
		t.Fatalf("with 127.0.0.0/8 allowed: %d %v", st, err)
	}
	if n := rcv.Hits.Load(); n != 1 {
		t.Fatalf("receiver got %d requests, want 1", n)
	}
}

// TestDialEachAddress: a name that resolves to several addresses has each
// one checked as it is dialled: the allowed one is tried (nothing listens
// there), the refused one, where the receiver listens, is never reached.
func TestDialEachAddress(t *testing.T) {
	dns := webhooktest.StartDNS(t)
	dns.Set("multi.example.com", webhooktest.Addrs("127.0.0.2", "127.0.0.1"))
	rcv := webhooktest.NewReceiver(t, false, nil)
	g := webhook.NewGuard(webhook.GuardConfig{Resolver: dns.Resolver(),
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	if _, err := get(g.Client(webhook.ClientConfig{}), "http://multi.example.com:"+rcv.Port()+"/"); err == nil {
		t.Fatal("the request went through")
	}
	if n := rcv.Hits.Load(); n != 0 {
		t.Fatalf("the receiver on the refused address got %d requests", n)
	}
	// With both allowed the dialer falls back to the listening one.
	g = webhook.NewGuard(webhook.GuardConfig{Resolver: dns.Resolver(),
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if st, err := get(g.Client(webhook.ClientConfig{}), "http://multi.example.com:"+rcv.Port()+"/"); err != nil || st != 204 {
		t.Fatalf("both allowed: %d %v", st, err)
	}
}

// TestNoRedirects: a receiver's redirect (here to the metadata address and
// to another local server) is an answer, never followed.
func TestNoRedirects(t *testing.T) {
	inner := webhooktest.NewReceiver(t, false, nil)
	for _, loc := range []string{"http://169.254.169.254/latest/meta-data/", inner.URL + "/"} {
		outer := webhooktest.NewReceiver(t, false, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, loc, http.StatusTemporaryRedirect)
		})
		g := webhook.NewGuard(webhook.GuardConfig{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
		st, err := get(g.Client(webhook.ClientConfig{}), outer.URL)
		if err != nil || st != 307 {
			t.Fatalf("redirect to %s: %d %v, want the 307 itself", loc, st, err)
		}
	}
	if n := inner.Hits.Load(); n != 0 {
		t.Fatalf("the redirect was followed %d times", n)
	}
}

func TestInsecureTLS(t *testing.T) {
	rcv := webhooktest.NewReceiver(t, true, nil)
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	g := webhook.NewGuard(webhook.GuardConfig{AllowPrivate: allow})
	if _, err := get(g.Client(webhook.ClientConfig{}), rcv.URL); err == nil {
		t.Fatal("a self-signed certificate was accepted without InsecureTLS")
	}
	if st, err := get(g.Client(webhook.ClientConfig{InsecureTLS: true}), rcv.URL); err != nil || st != 204 {
		t.Fatalf("InsecureTLS: %d %v", st, err)
	}
}

func TestErrIfPrivate(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "::ffff:127.0.0.1", "::1", "fc00::1", "fe80::1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "10.0.0.1", "192.168.0.1", "172.16.0.1"} {
		if err := webhook.ErrIfPrivate(netip.MustParseAddr(s)); !errors.Is(err, webhook.ErrPrivateAddress) {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"8.8.8.8", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8", "100.128.0.1", "172.32.0.1"} {
		if err := webhook.ErrIfPrivate(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// The guard's dialer honours the context.
func TestDialContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g := webhook.NewGuard(webhook.GuardConfig{})
	if _, err := g.DialContext(ctx, "tcp", "8.8.8.8:443"); err == nil {
		t.Fatal("dialled with a cancelled context")
	}
	if _, err := g.DialContext(context.Background(), "udp", "8.8.8.8:53"); !errors.Is(err, webhook.ErrPrivateAddress) {
		t.Fatalf("udp: %v", err)
	}
}
