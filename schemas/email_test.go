package schemas

import (
	"strings"
	"testing"
)

func TestNormalizeEmail(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		why            string // a word the refusal must contain ("" when accepted)
	}{
		{"plain", "ann@example.com", "ann@example.com", ""},
		{"trimmed, lower-cased", "  Ann.Lee+tag@Example.CO.UK \n", "ann.lee+tag@example.co.uk", ""},
		{"apostrophe", "o'hara@sub.example.org", "o'hara@sub.example.org", ""},
		{"atext specials", "a!#$%&'*+-/=?^_`{|}~z@example.com", "a!#$%&'*+-/=?^_`{|}~z@example.com", ""},
		{"A-label kept", "user@xn--exmple-cua.com", "user@xn--exmple-cua.com", ""},
		{"U-label to A-label", "user@exämple.com", "user@xn--exmple-cua.com", ""},
		{"upper-case U-label", "USER@EXÄMPLE.COM", "user@xn--exmple-cua.com", ""},
		{"decomposed U-label", "user@exa\u0308mple.com", "user@xn--exmple-cua.com", ""},
		{"fullwidth domain folded", "user@ｅｘａｍｐｌｅ.com", "user@example.com", ""},
		{"ideographic full stop", "user@example\u3002com", "user@example.com", ""},
		{"non-ASCII local part", "Jürgen@example.com", "jürgen@example.com", ""},
		{"local part NFC", "ju\u0308rgen@example.com", "jürgen@example.com", ""},
		{"CJK local part and domain", "用户@例子.广告", "用户@xn--fsqu00a.xn--4rr70v", ""},
		{"Hebrew domain (Bidi rule passes)", "a@דוגמה.com", "a@xn--6dbbec0c.com", ""},

		{"empty", "", "", "valid"},
		{"spaces only", "   ", "", "valid"},
		{"no @", "plain", "", "valid"},
		{"one label", "a@localhost", "", "two labels"},
		{"no local part", "@example.com", "", "valid"},
		{"no domain", "a@", "", "valid"},
		{"two @", "a@@example.com", "", "valid"},
		{"@ in local part", "a@b@example.com", "", "valid"},
		{"display name", "Ann <ann@example.com>", "", "spaces"},
		{"angle brackets", "<ann@example.com>", "", "valid"},
		{"inner space", "a b@example.com", "", "spaces"},
		{"quoted local part", `"ab"@example.com`, "", "valid"},
		{"leading dot", ".a@example.com", "", "valid"},
		{"double dot", "a..b@example.com", "", "valid"},
		{"leading hyphen label", "a@-example.com", "", "domain"},
		{"trailing hyphen label", "a@example-.com", "", "domain"},
		{"underscore", "a@exa_mple.com", "", "domain"},
		{"empty label", "a@example..com", "", "domain"},
		{"trailing dot", "a@example.com.", "", "two labels"},
		{"domain literal", "a@[127.0.0.1]", "", "domain"},
		{"bad punycode", "a@xn--zz.com", "", "domain"},
		{"hyphens in 3 and 4", "a@ab--cd.com", "", "domain"},
		{"Bidi rule", "a@\u05d0\u05d1a.com", "", "domain"},
		{"disallowed symbol in domain", "a@ex\ufffcample.com", "", "domain"},
		{"STD3 character in domain", "a@ex!ample.com", "", "domain"},
		{"local part too long", strings.Repeat("a", 65) + "@example.com", "", "64"},
		{"non-ASCII local part too long", strings.Repeat("ü", 33) + "@example.com", "", "64"},
		{"label too long", "a@" + strings.Repeat("b", 64) + ".com", "", "domain"},
		{"address too long", strings.Repeat("a", 60) + "@" + strings.Repeat(strings.Repeat("b", 60)+".", 3) + strings.Repeat("c", 20) + ".com", "", "254"},
		{"huge input", strings.Repeat("a", 5000) + "@example.com", "", "valid"},

		{"bidi override", "a\u202e@example.com", "", "bidirectional"},
		{"bidi override in domain", "a@exa\u202emple.com", "", "bidirectional"},
		{"right-to-left mark", "\u200fa@example.com", "", "bidirectional"},
		{"left-to-right isolate", "a@example.com\u2066", "", "bidirectional"},
		{"zero-width space", "a\u200b@example.com", "", "invisible"},
		{"zero-width joiner in domain", "a@exam\u200dple.com", "", "invisible"},
		{"zero-width non-joiner", "a\u200cb@example.com", "", "invisible"},
		{"word joiner", "a\u2060b@example.com", "", "invisible"},
		{"BOM", "\ufeffa@example.com", "", "invisible"},
		{"soft hyphen", "a\u00adb@example.com", "", "invisible"},
		{"Hangul filler", "a\u3164@example.com", "", "invisible"},
		{"variation selector", "a\ufe0f@example.com", "", "invisible"},
		{"combining grapheme joiner", "a\u034f@example.com", "", "invisible"},
		{"NUL", "a\x00b@example.com", "", "control"},
		{"DEL", "a\x7fb@example.com", "", "control"},
		{"C1 control", "a\u0085b@example.com", "", "control"},
		{"no-break space inside", "a\u00a0b@example.com", "", "spaces"},
		{"ideographic space inside", "a\u3000b@example.com", "", "spaces"},
		{"line separator", "a\u2028b@example.com", "", "spaces"},
		{"private use", "a\ue000@example.com", "", "private-use"},
		{"unassigned", "a\u0378@example.com", "", "unassigned"},
		{"tag character", "a\U000e0041@example.com", "", "invisible"},
		{"replacement character", "a\ufffd@example.com", "", "replacement"},
		{"invalid UTF-8", "a\xffb@example.com", "", "UTF-8"},
		{"fullwidth local part", "ｕｓｅｒ@example.com", "", "fullwidth"},
		{"fullwidth at sign", "user＠example.com", "", "valid"},
		{"ligature local part", "\ufb01le@example.com", "", "compatibility"},
		{"superscript local part", "a\u00b2@example.com", "", "compatibility"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NormalizeEmail(tc.in)
			if tc.why == "" {
				if err != nil || got != tc.want {
					t.Fatalf("NormalizeEmail(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
				}
				again, err := NormalizeEmail(got)
				if err != nil || again != got {
					t.Fatalf("the stored form %q is not stable: %q, %v", got, again, err)
				}
				return
			}
			if err == nil || got != "" {
				t.Fatalf("NormalizeEmail(%q) = %q, %v; want a refusal", tc.in, got, err)
			}
			if !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("NormalizeEmail(%q): %q does not say %q", tc.in, err, tc.why)
			}
		})
	}
}

func TestNormalizeDomain(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM":    "example.com",
		"bücher.example": "xn--bcher-kva.example",
		" ｅｘａｍｐｌｅ.org ":  "example.org",
	} {
		if got, err := NormalizeDomain(in); err != nil || got != want {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "localhost", "exa\u200bmple.com", "a..b", "xn--zz.com", "example.com\u202e"} {
		if got, err := NormalizeDomain(in); err == nil {
			t.Errorf("NormalizeDomain(%q) = %q, want a refusal", in, got)
		}
	}
}

// TestPlainASCIIDomainIsIDNA: the fast path answers what IDNA answers.
func TestPlainASCIIDomainIsIDNA(t *testing.T) {
	for _, d := range []string{"example.com", "EXAMPLE.Com", "a-b.c0", "1.2.3.4", "ab--cd.com", "xn--exmple-cua.com",
		"XN--EXMPLE-CUA.com", "-a.com", "a-.com", "a_b.com", "a..com", "com", strings.Repeat("a", 63) + ".com"} {
		fast, ok := plainASCIIDomain(d)
		if !ok {
			continue
		}
		slow, err := emailIDNA.ToASCII(d)
		if err != nil || slow != fast {
			t.Errorf("%q: fast path %q, IDNA %q, %v", d, fast, slow, err)
		}
	}
}

func BenchmarkNormalizeEmail(b *testing.B) {
	for _, in := range []string{"Ann.Lee+tag@Example.com", "jürgen@exämple.com"} {
		b.Run(in, func(b *testing.B) {
			for b.Loop() {
				if _, err := NormalizeEmail(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
