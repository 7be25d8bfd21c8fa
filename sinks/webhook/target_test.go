package webhook_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"sendstream/sinks/webhook"
	"sendstream/sinks/webhook/webhooktest"
)

// checkTarget runs both steps of the subscribe-time check.
func checkTarget(g *webhook.Guard, raw string) error {
	t, err := webhook.ParseTarget(raw, false)
	if err != nil {
		return err
	}
	return g.CheckTarget(context.Background(), t)
}

func code(err error) string {
	var te *webhook.TargetError
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

func TestTargetPrivateSpellings(t *testing.T) {
	g := webhook.NewGuard(webhook.GuardConfig{Resolver: webhooktest.StartDNS(t).Resolver()})
	for _, u := range webhooktest.PrivateSpellings {
		if err := checkTarget(g, u); code(err) != webhook.CodePrivateTarget {
			t.Errorf("%s: got %v (code %q), want %s", u, err, code(err), webhook.CodePrivateTarget)
		}
	}
}

func TestTargetSyntax(t *testing.T) {
	g := webhook.NewGuard(webhook.GuardConfig{Resolver: webhooktest.StartDNS(t).Resolver()})
	cases := []struct{ url, code string }{
		{"", webhook.CodeInvalidURL},
		{"example.com/hook", webhook.CodeInvalidURL},
		{"/hook", webhook.CodeInvalidURL},
		{"ftp://8.8.8.8/", webhook.CodeInvalidURL},
		{"javascript:alert(1)", webhook.CodeInvalidURL},
		{"mailto:a@b.c", webhook.CodeInvalidURL},
		{"http:8.8.8.8", webhook.CodeInvalidURL},
		{"http:///path", webhook.CodeInvalidURL},
		{"http://8.8.8.8:0/", webhook.CodeInvalidURL},
		{"http://8.8.8.8:65536/", webhook.CodeInvalidURL},
		{"http://8.8.8.8:http/", webhook.CodeInvalidURL},
		{"http://[fe80::1%25eth0]/", webhook.CodeInvalidURL},
		{"http://exa mple.com/", webhook.CodeInvalidURL},
		{"http://under_score.example/", webhook.CodeInvalidURL},
		{"http://1.2.3.4.5/", webhook.CodeInvalidURL},
		{"http://%6c%6f%63%61%6c%68%6f%73%74/", webhook.CodeInvalidURL}, // percent-encoded localhost: refused as unparsable
		{"http://0x08080808/", webhook.CodeInvalidURL},                  // a public address, oddly spelled
		{"http://134744072/", webhook.CodeInvalidURL},
		{"http://256.1.1.1/", webhook.CodeInvalidURL},
		{"http://" + string(make([]byte, 2100)), webhook.CodeInvalidURL},
		{"http://user:pass@8.8.8.8/", webhook.CodeURLCredentials},
		{"http://user@8.8.8.8/", webhook.CodeURLCredentials},
		{"http://@8.8.8.8/", webhook.CodeURLCredentials},
		{"https://:secret@example.com/", webhook.CodeURLCredentials},
		{"http://nonexistent.test/", webhook.CodeInvalidURL}, // NXDOMAIN
	}
	for _, c := range cases {
		if err := checkTarget(g, c.url); code(err) != c.code {
			t.Errorf("%.60q: got %v (code %q), want %s", c.url, err, code(err), c.code)
		}
	}
}

func TestTargetPublic(t *testing.T) {
	dns := webhooktest.StartDNS(t)
	dns.Set("hooks.example.com", webhooktest.Addrs("93.184.216.34"))
	g := webhook.NewGuard(webhook.GuardConfig{Resolver: dns.Resolver()})
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
	dns := webhooktest.StartDNS(t)
	dns.Set("inside.example.com", webhooktest.Addrs("10.1.2.3"))
	dns.Set("mixed.example.com", webhooktest.Addrs("93.184.216.34", "127.0.0.1"))
	dns.Set("meta.example.com", webhooktest.Addrs("169.254.169.254"))
	dns.Set("127.0.0.1.nip.example", webhooktest.Addrs("127.0.0.1"))
	g := webhook.NewGuard(webhook.GuardConfig{Resolver: dns.Resolver()})
	for _, u := range []string{"https://inside.example.com/", "https://mixed.example.com/", "http://meta.example.com/", "http://127.0.0.1.nip.example/"} {
		if err := checkTarget(g, u); code(err) != webhook.CodePrivateTarget {
			t.Errorf("%s: got %v, want %s", u, err, webhook.CodePrivateTarget)
		}
	}
}

func TestTargetAllowPrivate(t *testing.T) {
	g := webhook.NewGuard(webhook.GuardConfig{
		Resolver:     webhooktest.StartDNS(t).Resolver(),
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("fd00::/8")},
	})
	for _, u := range []string{"http://127.0.0.1:9000/", "http://[::ffff:127.0.0.1]/", "http://[fd00::5]/"} {
		if err := checkTarget(g, u); err != nil {
			t.Errorf("%s with 127.0.0.0/8 allowed: %v", u, err)
		}
	}
	for _, u := range []string{"http://10.0.0.1/", "http://169.254.169.254/", "http://localhost/"} {
		if err := checkTarget(g, u); code(err) != webhook.CodePrivateTarget {
			t.Errorf("%s with only 127.0.0.0/8 allowed: got %v", u, err)
		}
	}
}

func TestParseTargetHTTPSOnly(t *testing.T) {
	if _, err := webhook.ParseTarget("http://8.8.8.8/", true); code(err) != webhook.CodeInvalidURL {
		t.Errorf("http with httpsOnly: %v", err)
	}
	if _, err := webhook.ParseTarget("https://8.8.8.8/", true); err != nil {
		t.Errorf("https with httpsOnly: %v", err)
	}
}

func TestParseOutbound(t *testing.T) {
	o, err := webhook.ParseOutbound(" 127.0.0.0/8, ::1 ,10.1.2.3/8", "1")
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
	if o, err := webhook.ParseOutbound("", ""); err != nil || len(o.AllowPrivate) != 0 || o.InsecureTLS {
		t.Errorf("empty: %+v %v", o, err)
	}
	for _, bad := range [][2]string{{"127.0.0.0/33", ""}, {"nope", ""}, {"", "yes"}} {
		if _, err := webhook.ParseOutbound(bad[0], bad[1]); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
