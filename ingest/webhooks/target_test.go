package webhooks_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"sendstream/ingest/webhooks"
)

// privateSpellings are targets that are, or spell, private or internal
// addresses (issue 25's table and the odd forms clients accept).
var privateSpellings = []string{
	"http://127.0.0.1/",
	"http://127.0.0.1:8080/hook",
	"http://127.255.255.254/",
	"http://10.0.0.1/",
	"http://172.16.5.4/",
	"http://172.31.255.255/",
	"http://192.168.1.1/",
	"http://169.254.169.254/latest/meta-data/",
	"http://169.254.1.1/",
	"http://100.64.0.1/",
	"http://100.127.255.254/",
	"http://0.0.0.0/",
	"http://0.1.2.3/",
	"http://0/",
	"http://[::1]/",
	"http://[0:0:0:0:0:0:0:1]/",
	"http://[::]/",
	"http://[fc00::1]/",
	"http://[fd12:3456:789a::1]/",
	"http://[fe80::1]/",
	"http://[::ffff:127.0.0.1]/",
	"http://[::ffff:7f00:1]/",
	"http://[::ffff:169.254.169.254]/",
	"http://[::ffff:10.0.0.1]/",
	"http://[64:ff9b::7f00:1]/",
	"http://[::127.0.0.1]/",
	"http://2130706433/",
	"http://0x7f000001/",
	"http://0x7f.1/",
	"http://0x7F.0.0.1/",
	"http://0177.0.0.1/",
	"http://0177.1/",
	"http://017700000001/",
	"http://127.1/",
	"http://127.0.1/",
	"http://10.1/",
	"http://3232235777/",
	"http://0xa9fea9fe/",
	"http://localhost/",
	"http://localhost./",
	"http://LOCALHOST/",
	"http://LocalHost.:80/",
	"http://foo.localhost/",
	"http://ｌｏｃａｌｈｏｓｔ/",
	"http://１２７.０.０.１/",
	"https://127.0.0.1:443/",
	"http://224.0.0.1/",
	"http://255.255.255.255/",
}

// checkTarget runs both steps of the subscribe-time check.
func checkTarget(g *webhooks.Guard, raw string) error {
	t, err := webhooks.ParseTarget(raw, false)
	if err != nil {
		return err
	}
	return g.CheckTarget(context.Background(), t)
}

func code(err error) string {
	var te *webhooks.TargetError
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

func TestTargetPrivateSpellings(t *testing.T) {
	g := webhooks.NewGuard(webhooks.GuardConfig{Resolver: startDNS(t).resolver()})
	for _, u := range privateSpellings {
		if err := checkTarget(g, u); code(err) != webhooks.CodePrivateTarget {
			t.Errorf("%s: got %v (code %q), want %s", u, err, code(err), webhooks.CodePrivateTarget)
		}
	}
}

func TestTargetSyntax(t *testing.T) {
	g := webhooks.NewGuard(webhooks.GuardConfig{Resolver: startDNS(t).resolver()})
	cases := []struct{ url, code string }{
		{"", webhooks.CodeInvalidURL},
		{"example.com/hook", webhooks.CodeInvalidURL},
		{"/hook", webhooks.CodeInvalidURL},
		{"ftp://8.8.8.8/", webhooks.CodeInvalidURL},
		{"javascript:alert(1)", webhooks.CodeInvalidURL},
		{"mailto:a@b.c", webhooks.CodeInvalidURL},
		{"http:8.8.8.8", webhooks.CodeInvalidURL},
		{"http:///path", webhooks.CodeInvalidURL},
		{"http://8.8.8.8:0/", webhooks.CodeInvalidURL},
		{"http://8.8.8.8:65536/", webhooks.CodeInvalidURL},
		{"http://8.8.8.8:http/", webhooks.CodeInvalidURL},
		{"http://[fe80::1%25eth0]/", webhooks.CodeInvalidURL},
		{"http://exa mple.com/", webhooks.CodeInvalidURL},
		{"http://under_score.example/", webhooks.CodeInvalidURL},
		{"http://1.2.3.4.5/", webhooks.CodeInvalidURL},
		{"http://%6c%6f%63%61%6c%68%6f%73%74/", webhooks.CodeInvalidURL}, // percent-encoded localhost: refused as unparsable
		{"http://0x08080808/", webhooks.CodeInvalidURL},                  // a public address, oddly spelled
		{"http://134744072/", webhooks.CodeInvalidURL},
		{"http://256.1.1.1/", webhooks.CodeInvalidURL},
		{"http://" + string(make([]byte, 2100)), webhooks.CodeInvalidURL},
		{"http://user:pass@8.8.8.8/", webhooks.CodeURLCredentials},
		{"http://user@8.8.8.8/", webhooks.CodeURLCredentials},
		{"http://@8.8.8.8/", webhooks.CodeURLCredentials},
		{"https://:secret@example.com/", webhooks.CodeURLCredentials},
		{"http://nonexistent.test/", webhooks.CodeInvalidURL}, // NXDOMAIN
	}
	for _, c := range cases {
		if err := checkTarget(g, c.url); code(err) != c.code {
			t.Errorf("%.60q: got %v (code %q), want %s", c.url, err, code(err), c.code)
		}
	}
}

func TestTargetPublic(t *testing.T) {
	dns := startDNS(t)
	dns.set("hooks.example.com", addrs("93.184.216.34"))
	g := webhooks.NewGuard(webhooks.GuardConfig{Resolver: dns.resolver()})
	for _, u := range []string{
		"http://8.8.8.8/",
		"https://1.1.1.1:8443/hooks?x=1#frag",
		"HTTPS://8.8.8.8/",
		"http://[2606:4700:4700::1111]/",
		"https://hooks.example.com/in",
		"https://HOOKS.example.com./in",
	} {
		if err := checkTarget(g, u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestTargetResolvesToPrivate(t *testing.T) {
	dns := startDNS(t)
	dns.set("inside.example.com", addrs("10.1.2.3"))
	dns.set("mixed.example.com", addrs("93.184.216.34", "127.0.0.1"))
	dns.set("meta.example.com", addrs("169.254.169.254"))
	dns.set("127.0.0.1.nip.example", addrs("127.0.0.1"))
	g := webhooks.NewGuard(webhooks.GuardConfig{Resolver: dns.resolver()})
	for _, u := range []string{"https://inside.example.com/", "https://mixed.example.com/", "http://meta.example.com/", "http://127.0.0.1.nip.example/"} {
		if err := checkTarget(g, u); code(err) != webhooks.CodePrivateTarget {
			t.Errorf("%s: got %v, want %s", u, err, webhooks.CodePrivateTarget)
		}
	}
}

func TestTargetAllowPrivate(t *testing.T) {
	g := webhooks.NewGuard(webhooks.GuardConfig{
		Resolver:     startDNS(t).resolver(),
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("fd00::/8")},
	})
	for _, u := range []string{"http://127.0.0.1:9000/", "http://[::ffff:127.0.0.1]/", "http://[fd00::5]/"} {
		if err := checkTarget(g, u); err != nil {
			t.Errorf("%s with 127.0.0.0/8 allowed: %v", u, err)
		}
	}
	for _, u := range []string{"http://10.0.0.1/", "http://169.254.169.254/", "http://localhost/"} {
		if err := checkTarget(g, u); code(err) != webhooks.CodePrivateTarget {
			t.Errorf("%s with only 127.0.0.0/8 allowed: got %v", u, err)
		}
	}
}

func TestParseTargetHTTPSOnly(t *testing.T) {
	if _, err := webhooks.ParseTarget("http://8.8.8.8/", true); code(err) != webhooks.CodeInvalidURL {
		t.Errorf("http with httpsOnly: %v", err)
	}
	if _, err := webhooks.ParseTarget("https://8.8.8.8/", true); err != nil {
		t.Errorf("https with httpsOnly: %v", err)
	}
}

func TestParseOutbound(t *testing.T) {
	o, err := webhooks.ParseOutbound(" 127.0.0.0/8, ::1 ,10.1.2.3/8", "1")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.0.0.0/8")}
	if len(o.AllowPrivate) != len(want) || !o.InsecureTLS {
		t.Fatalf("got %+v", o)
	}
	for i := range want {
		if o.AllowPrivate[i] != want[i] {
			t.Errorf("prefix %d: %v, want %v", i, o.AllowPrivate[i], want[i])
		}
	}
	if o, err := webhooks.ParseOutbound("", ""); err != nil || len(o.AllowPrivate) != 0 || o.InsecureTLS {
		t.Errorf("empty: %+v %v", o, err)
	}
	for _, bad := range [][2]string{{"127.0.0.0/33", ""}, {"nope", ""}, {"", "yes"}} {
		if _, err := webhooks.ParseOutbound(bad[0], bad[1]); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
