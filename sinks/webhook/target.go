package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Codes of refused target URLs (the `code` of the 400 answer).
const (
	// CodeInvalidURL: not an absolute http(s) URL with a usable host.
	CodeInvalidURL = "invalid_url"
	// CodeURLCredentials: the URL carries a user name or password.
	CodeURLCredentials = "url_credentials"
	// CodePrivateTarget: the host is, spells or resolves to a private or
	// internal address.
	CodePrivateTarget = "private_target"
)

// TargetError says why a target URL was refused. Callers answer 400 with
// Code and Reason; nothing about it is worth retrying.
type TargetError struct {
	Code   string
	Reason string
}

func (e *TargetError) Error() string { return e.Reason }

func refuse(code, format string, args ...any) *TargetError {
	return &TargetError{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// Target is a syntactically valid webhook target URL.
type Target struct {
	// URL is the URL as given (surrounding spaces removed); it is what is
	// stored and requested.
	URL string
	// Host is the host in canonical form: lower-case ASCII (IDNA), no
	// trailing dot, an IPv6 literal without brackets.
	Host string
	// Addr is set when the host is an IP literal.
	Addr netip.Addr
	// Port is the explicit or the scheme's default port.
	Port uint16
}

// ParseTarget checks the rules that need no network: an absolute http or
// https URL (https only when httpsOnly), a host, no user name or password,
// a port from 1 to 65535 (no length limit: the spec sets none). Host spellings that
// some clients read as IPv4 addresses but that are not dotted-decimal
// (2130706433, 0x7f.1, 0177.0.0.1, 127.1) are decoded: a private one is
// refused with CodePrivateTarget, any other with CodeInvalidURL (no
// resolver would connect to it). The names localhost and *.localhost
// (RFC 6761), with or without a trailing dot, are refused without a
// lookup. It returns a *TargetError.
func ParseTarget(raw string, httpsOnly bool) (Target, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return Target{}, refuse(CodeInvalidURL, "targetUrl is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, refuse(CodeInvalidURL, "targetUrl is not a valid URL")
	}
	want := "http or https"
	if httpsOnly {
		want = "https"
	}
	if !u.IsAbs() || u.Opaque != "" || (u.Scheme != "https" && (httpsOnly || u.Scheme != "http")) {
		return Target{}, refuse(CodeInvalidURL, "targetUrl must be an absolute %s URL", want)
	}
	if u.User != nil {
		return Target{}, refuse(CodeURLCredentials, "targetUrl must not contain a user name or password; use a secret in the path or a signature instead")
	}
	t := Target{URL: raw}
	if t.Port, err = portOf(u); err != nil {
		return Target{}, err
	}
	host := u.Hostname()
	if host == "" {
		return Target{}, refuse(CodeInvalidURL, "targetUrl has no host")
	}
	if strings.HasPrefix(u.Host, "[") {
		a, err := netip.ParseAddr(host)
		if err != nil || a.Zone() != "" {
			return Target{}, refuse(CodeInvalidURL, "targetUrl has an invalid IPv6 address")
		}
		t.Host, t.Addr = a.Unmap().String(), a
		return t, nil
	}
	ascii, err := idna.Lookup.ToASCII(strings.ToLower(host))
	if err != nil || ascii == "" {
		return Target{}, refuse(CodeInvalidURL, "targetUrl has an invalid host name")
	}
	t.Host = strings.TrimSuffix(ascii, ".")
	if t.Host == "" || strings.HasSuffix(t.Host, ".") {
		return Target{}, refuse(CodeInvalidURL, "targetUrl has an invalid host name")
	}
	if t.Host == "localhost" || strings.HasSuffix(t.Host, ".localhost") {
		return Target{}, refuse(CodePrivateTarget, "targetUrl names a local host; private and internal addresses are not allowed")
	}
	if a, err := netip.ParseAddr(t.Host); err == nil && a.Is4() {
		t.Addr = a
		return t, nil
	}
	if numericLast(t.Host) {
		a, ok := parseInetAton(t.Host)
		if !ok {
			return Target{}, refuse(CodeInvalidURL, "targetUrl has an invalid host: a name whose last label is a number must be a dotted-decimal IPv4 address")
		}
		if ErrIfPrivate(a) != nil {
			return Target{}, refuse(CodePrivateTarget, "targetUrl spells the private address %s; private and internal addresses are not allowed", a)
		}
		return Target{}, refuse(CodeInvalidURL, "targetUrl spells the IPv4 address %s in an unusual form; write it in dotted-decimal form", a)
	}
	return t, nil
}

func portOf(u *url.URL) (uint16, error) {
	p := u.Port()
	if p == "" {
		if u.Scheme == "https" {
			return 443, nil
		}
		return 80, nil
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return 0, refuse(CodeInvalidURL, "targetUrl has an invalid port")
	}
	return uint16(n), nil
}

// numericLast reports whether the last label of host is a number (decimal,
// or hexadecimal with 0x), which the URL standard reads as an IPv4 address.
func numericLast(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if strings.HasPrefix(last, "0x") {
		last = last[2:]
		return strings.Trim(last, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// parseInetAton decodes the IPv4 forms inet_aton(3) and the URL standard
// accept: one to four parts, each decimal, octal (leading 0) or hexadecimal
// (0x), the last part filling the remaining bytes.
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		n, err := strconv.ParseUint(digits, base, 32)
		if p == "" || err != nil {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := uint(8 * (4 - i))
		if rest < 32 && n >= 1<<rest {
			return netip.Addr{}, false
		}
		v = v<<rest | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// Resolver looks up the addresses of a host name. *net.Resolver
// implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckTarget applies the address rules to a parsed target: an IP literal
// must be allowed by the guard; a name is resolved with the guard's
// resolver and every address it resolves to must be allowed. It returns a
// *TargetError for a refusal (CodePrivateTarget, or CodeInvalidURL when the
// name does not exist) and any other error when the lookup itself failed
// (a time-out, no DNS server): the caller answers 503, not 400.
//
// Subscribe-time checks are advice to the caller; the dial-time guard
// (Guard.DialContext) is what stops a name that changes its answer later.
func (g *Guard) CheckTarget(ctx context.Context, t Target) error {
	if t.Addr.IsValid() {
		if err := g.CheckAddr(t.Addr); err != nil {
			return refuse(CodePrivateTarget, "targetUrl points to %s, a private or internal address; those are not allowed", t.Addr.Unmap())
		}
		return nil
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", t.Host)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return refuse(CodeInvalidURL, "targetUrl's host %s does not resolve", t.Host)
		}
		return fmt.Errorf("resolve %s: %w", t.Host, err)
	}
	if len(addrs) == 0 {
		return refuse(CodeInvalidURL, "targetUrl's host %s has no address", t.Host)
	}
	for _, a := range addrs {
		if err := g.CheckAddr(a); err != nil {
			return refuse(CodePrivateTarget, "targetUrl's host %s resolves to %s, a private or internal address; those are not allowed", t.Host, a.Unmap())
		}
	}
	return nil
}
