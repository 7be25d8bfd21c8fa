package schemas

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"
)

// The email address rule. Every address the service takes (a contact's
// email, a send's to, cc, bcc, replyTo and fromEmail, an event's contact, a
// sign-up form, a send policy's sender, a member, a provider's report) goes
// through NormalizeEmail, so one address has one stored form and two
// spellings of it are one contact:
//
//   - Surrounding white space is trimmed; the address is a plain addr-spec
//     local@domain (no display name, no angle brackets, no quoted local
//     part, no domain literal).
//   - No invisible or control character anywhere: C0/C1 controls, format
//     characters (Cf: zero-width space, joiner and non-joiner, word joiner,
//     BOM, soft hyphen, the bidi marks, embeddings, overrides and isolates),
//     default-ignorable characters (Hangul fillers, variation selectors,
//     combining grapheme joiner), private-use, unassigned and surrogate code
//     points, U+FFFD, and no space of any kind.
//   - The domain is mapped and checked by IDNA (UTS #46 lookup mapping with
//     the IDNA2008 label rules, the Bidi rule of RFC 5893, STD3 host name
//     characters and DNS lengths) and stored as its lower-case ASCII form,
//     so user@exämple.com, user@EXÄMPLE.com and user@xn--exmple-cua.com are
//     one address. That mapping folds compatibility forms in the domain
//     (fullwidth ｅｘａｍｐｌｅ.com is example.com), as browsers do. It
//     must have at least two labels.
//   - The local part may hold non-ASCII letters (RFC 6531): it is
//     lower-cased and stored NFC-normalised. It must be a dot-atom of
//     RFC 5322 atext and non-ASCII characters, and NFKC-stable: fullwidth
//     letters, ligatures, circled or superscript forms and other
//     compatibility characters are refused rather than folded, because a
//     mailbox name is the receiving server's to interpret. Such an address
//     is sent only through a relay offering SMTPUTF8.
//   - Lengths in octets of the stored form: local part ≤ 64, address ≤ 254
//     (RFC 5321), domain ≤ 253 and labels ≤ 63.

const (
	maxEmailOctets = 254 // the stored form (RFC 5321 4.5.3.1.3 path, less its brackets)
	maxLocalOctets = 64  // RFC 5321 4.5.3.1.1
	// maxEmailInput bounds the work on input that cannot be an address: a
	// stored form of 254 octets comes from at most 4 octets of input per
	// octet (a 4-octet character the IDNA mapping folds to one letter).
	maxEmailInput = 4 * maxEmailOctets
)

// emailIDNA maps a domain as UTS #46 does for lookup (non-transitional),
// with the Bidi rule, STD3 host name rules and DNS length checks.
var emailIDNA = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.VerifyDNSLength(true), idna.Transitional(false))

// errBadEmail is the refusal of anything that is not a plain address.
var errBadEmail = errors.New("must be a valid email address")

// NormalizeEmail checks s against the email rule (above) and returns its
// stored form, or an error whose text completes "<field> …" in an answer,
// e.g. "must not contain invisible, control or bidirectional formatting
// characters (U+202E)". It is safe for concurrent use and does no I/O.
func NormalizeEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxEmailInput {
		return "", errBadEmail
	}
	if err := checkEmailRunes(s); err != nil {
		return "", err
	}
	at := strings.LastIndexByte(s, '@')
	if at < 1 || at == len(s)-1 {
		return "", errBadEmail
	}
	local, err := normalizeLocal(s[:at])
	if err != nil {
		return "", err
	}
	domain, err := normalizeDomain(s[at+1:])
	if err != nil {
		return "", err
	}
	e := local + "@" + domain
	if len(e) > maxEmailOctets {
		return "", fmt.Errorf("%w (at most %d octets)", errBadEmail, maxEmailOctets)
	}
	return e, nil
}

// NormalizeDomain returns the stored (lower-case ASCII, IDNA) form of a
// mail domain by the domain half of the email rule, the form NormalizeEmail
// gives the part after the @ (for `admin domain add`); the error's text
// completes "<domain> …".
func NormalizeDomain(d string) (string, error) {
	d = strings.TrimSpace(d)
	if d == "" || len(d) > maxEmailInput {
		return "", errors.New("must be a domain name")
	}
	if err := checkEmailRunes(d); err != nil {
		return "", err
	}
	return asciiDomain(d)
}

// normalizeDomain is NormalizeDomain for the part after the @ of an
// address whose characters were checked.
func normalizeDomain(d string) (string, error) {
	a, err := asciiDomain(d)
	if err != nil {
		return "", fmt.Errorf("%w: the domain %v", errBadEmail, err)
	}
	return a, nil
}

// asciiDomain maps and checks a domain by IDNA.
func asciiDomain(d string) (string, error) {
	if a, ok := plainASCIIDomain(d); ok {
		return a, nil
	}
	a, err := emailIDNA.ToASCII(d)
	if err != nil {
		return "", fmt.Errorf("is not a valid internationalised domain name (%v)", err)
	}
	if !hostName(a) {
		return "", errors.New("must be a host name of at least two labels")
	}
	return a, nil
}

// plainASCIIDomain is the fast path of NormalizeDomain for the common case,
// an ASCII host name without A-labels: lower-cased, it is its own IDNA form
// when every label passes hostName and has no "--" in its third and fourth
// places (UTS #46 CheckHyphens); ok is false for anything else, which goes
// through IDNA.
func plainASCIIDomain(d string) (string, bool) {
	if HasNonASCII(d) {
		return "", false
	}
	a := strings.ToLower(d)
	if !hostName(a) {
		return "", false
	}
	for l := range strings.SplitSeq(a, ".") {
		if len(l) >= 4 && l[2] == '-' && l[3] == '-' {
			return "", false
		}
	}
	return a, true
}

// HasNonASCII reports whether s holds a byte outside US-ASCII: an address
// that does can only travel in an SMTPUTF8 transaction (RFC 6531).
func HasNonASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// checkEmailRunes refuses invalid UTF-8 and the characters no address may
// hold: spaces, controls and invisible or bidi formatting characters.
func checkEmailRunes(s string) error {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == ' ':
				return errors.New("must be a valid email address (no spaces)")
			case c < 0x20 || c == 0x7f:
				return fmt.Errorf("must not contain control characters (%U)", rune(c))
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return errors.New("must be valid UTF-8")
		}
		if what := forbiddenRune(r); what != "" {
			return fmt.Errorf("must not contain %s (%U)", what, r)
		}
		i += n
	}
	return nil
}

// forbiddenRune names the kind of a non-ASCII character no address may
// hold, or returns "".
func forbiddenRune(r rune) string {
	switch {
	case unicode.Is(unicode.Zs, r) || r == '\u2028' || r == '\u2029':
		return "spaces"
	case unicode.Is(unicode.Cc, r):
		return "control characters"
	case unicode.Is(unicode.Cf, r),
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r),
		unicode.Is(unicode.Variation_Selector, r):
		return "invisible, control or bidirectional formatting characters"
	case r == utf8.RuneError, unicode.Is(unicode.Co, r), !unicode.IsGraphic(r):
		return "unassigned, private-use or replacement characters"
	}
	return ""
}

// normalizeLocal lower-cases and NFC-normalises a local part and checks it:
// a dot-atom of at most 64 octets, NFKC-stable.
func normalizeLocal(l string) (string, error) {
	if HasNonASCII(l) {
		l = norm.NFC.String(strings.ToLower(norm.NFC.String(l)))
		if !norm.NFKC.IsNormalString(l) {
			return "", fmt.Errorf("must not contain compatibility characters such as fullwidth letters in the part before the @ (%U); use the plain form", compatRune(l))
		}
	} else {
		l = strings.ToLower(l)
	}
	if len(l) > maxLocalOctets {
		return "", fmt.Errorf("%w (the part before the @ holds at most %d octets)", errBadEmail, maxLocalOctets)
	}
	if !dotAtom(l) {
		return "", errBadEmail
	}
	return l, nil
}

// compatRune returns the first character of l that NFKC changes.
func compatRune(l string) rune {
	for _, r := range l {
		if c := string(r); !norm.NFKC.IsNormalString(c) {
			return r
		}
	}
	r, _ := utf8.DecodeRuneInString(l[norm.NFKC.QuickSpanString(l):])
	return r
}

// dotAtom reports whether l is an RFC 5322 dot-atom of atext, extended by
// RFC 6532 with non-ASCII characters (already checked by checkEmailRunes).
func dotAtom(l string) bool {
	if l == "" || l[0] == '.' || l[len(l)-1] == '.' || strings.Contains(l, "..") {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c >= utf8.RuneSelf || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if !strings.ContainsRune(".!#$%&'*+-/=?^_`{|}~", rune(c)) {
			return false
		}
	}
	return true
}

// hostName accepts an ASCII host name of two or more labels of 1-63
// letters, digits and inner hyphens, at most 253 octets.
func hostName(d string) bool {
	if len(d) > 253 {
		return false
	}
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
