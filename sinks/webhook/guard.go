package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
	"github.com/valyala/fasthttp"
)

// ErrPrivateAddress is wrapped by every refusal of the guard: the address
// is private or internal and not in the allowed ranges.
var ErrPrivateAddress = errors.New("private or internal address")

// DefaultTimeout is the time a receiver has to answer (spec 6, 8.3).
const DefaultTimeout = 10 * time.Second

// defaultGuardian applies the default rules, without allowed ranges.
var defaultGuardian = ssrf.New(ssrf.WithAnyPort())

// ErrIfPrivate checks a under the default rules (no allowed ranges): an
// error wrapping ErrPrivateAddress for loopback, RFC 1918, link-local (and
// so 169.254.169.254), CGNAT 100.64/10, 0.0.0.0/8, multicast, reserved and
// documentation ranges, and every IPv6 address outside global unicast or in
// its special ranges (loopback, ULA fc00::/7, link-local fe80::/10, NAT64).
// IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry.
func ErrIfPrivate(a netip.Addr) error {
	return check(defaultGuardian, a)
}

func check(g *ssrf.Guardian, a netip.Addr) error {
	if err := g.SafeAddr(a.Unmap()); err != nil {
		return fmt.Errorf("%w: %s (%v)", ErrPrivateAddress, a.Unmap(), err)
	}
	return nil
}

// GuardConfig configures a Guard. Zero values take the defaults.
type GuardConfig struct {
	// AllowPrivate lists ranges let through although private (local
	// development and tests only: SENDSTREAM_WEBHOOK_ALLOW_PRIVATE).
	AllowPrivate []netip.Prefix
	// Resolver resolves names for subscribe-time checks and for dialling
	// (default net.DefaultResolver).
	Resolver *net.Resolver
	// DialTimeout bounds connecting, DNS included (default DefaultTimeout).
	DialTimeout time.Duration
}

// Guard decides which addresses outgoing webhooks may reach, when a target
// is registered (CheckTarget) and again on every connection (DialContext,
// DialTimeout, Client): the net.Dialer's Control hook sees each address
// actually dialled after DNS resolution, so a name that rebinds to a
// private address, or that resolves to several addresses of which some are
// private, never reaches one. Safe for concurrent use.
type Guard struct {
	guardian *ssrf.Guardian
	resolver *net.Resolver
	dialer   *net.Dialer
	allowed  []netip.Prefix
}

// NewGuard returns a Guard. It has no side effects.
func NewGuard(cfg GuardConfig) *Guard {
	var v4, v6 []netip.Prefix
	for _, p := range cfg.AllowPrivate {
		p = p.Masked()
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultTimeout
	}
	g := &Guard{
		guardian: ssrf.New(ssrf.WithAnyPort(), ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...)),
		resolver: cfg.Resolver,
		allowed:  append(v4, v6...),
	}
	g.dialer = &net.Dialer{Timeout: cfg.DialTimeout, Resolver: cfg.Resolver, Control: g.control}
	return g
}

// Allowed returns the private ranges this guard lets through.
func (g *Guard) Allowed() []netip.Prefix { return append([]netip.Prefix(nil), g.allowed...) }

// CheckAddr reports whether a may be reached: nil, or an error wrapping
// ErrPrivateAddress. An allowed range wins over the default rules.
func (g *Guard) CheckAddr(a netip.Addr) error { return check(g.guardian, a) }

// control is the net.Dialer Control hook: it runs for every address the
// dialer connects to, after resolution, before the connection is made.
func (g *Guard) control(network, address string, _ syscall.RawConn) error {
	if network != "tcp4" && network != "tcp6" {
		return fmt.Errorf("%w: network %s is not allowed", ErrPrivateAddress, network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable address %q", ErrPrivateAddress, address)
	}
	return g.CheckAddr(ap.Addr())
}

// DialContext connects to address ("host:port") over TCP, refusing every
// private or internal address it resolves to (the error wraps
// ErrPrivateAddress when that is why no connection was made).
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return nil, fmt.Errorf("dial %s %s: %w: only TCP is allowed", network, address, ErrPrivateAddress)
	}
	return g.dialer.DialContext(ctx, network, address)
}

// DialTimeout is DialContext with a time limit, shaped as fasthttp's
// DialFuncWithTimeout.
func (g *Guard) DialTimeout(address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return g.DialContext(ctx, "tcp", address)
}

// ClientConfig configures the HTTP client of the delivery stage.
type ClientConfig struct {
	// InsecureTLS accepts any receiver certificate (local development
	// only: SENDSTREAM_WEBHOOK_INSECURE_TLS=1).
	InsecureTLS bool
	// Timeout bounds one attempt's connect, write and read (default
	// DefaultTimeout).
	Timeout time.Duration
	// MaxResponseBodySize caps what is read of an answer (default 64 KiB);
	// a larger body fails the attempt with fasthttp.ErrBodyTooLarge.
	MaxResponseBodySize int
	// UserAgent names the service (default "Sendstream-Webhooks/1.0").
	UserAgent string
}

// Client returns a fasthttp client whose every connection goes through the
// guard. It follows no redirect (fasthttp's Do never does; do not call
// DoRedirects). Safe for concurrent use.
func (g *Guard) Client(cfg ClientConfig) *fasthttp.Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxResponseBodySize <= 0 {
		cfg.MaxResponseBodySize = 64 << 10
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "Sendstream-Webhooks/1.0"
	}
	return &fasthttp.Client{
		Name:                     cfg.UserAgent,
		DialTimeout:              g.DialTimeout,
		TLSConfig:                &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.InsecureTLS}, //nolint:gosec // local development only, see ClientConfig
		ReadTimeout:              cfg.Timeout,
		WriteTimeout:             cfg.Timeout,
		MaxResponseBodySize:      cfg.MaxResponseBodySize,
		MaxIdleConnDuration:      30 * time.Second,
		MaxConnWaitTimeout:       cfg.Timeout, // wait for a free connection to a busy host rather than fail at once
		NoDefaultUserAgentHeader: false,
		RetryIfErr:               func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
	}
}

// Outbound are the outgoing-webhook settings for local development.
type Outbound struct {
	// AllowPrivate: SENDSTREAM_WEBHOOK_ALLOW_PRIVATE, comma-separated CIDRs.
	AllowPrivate []netip.Prefix
	// InsecureTLS: SENDSTREAM_WEBHOOK_INSECURE_TLS=1.
	InsecureTLS bool
}

// ParseOutbound reads the two settings' values (the caller reads the
// environment): allowPrivate is comma-separated CIDRs (a bare address means
// that one address), insecureTLS is "", "0", "false", "1" or "true".
func ParseOutbound(allowPrivate, insecureTLS string) (Outbound, error) {
	var o Outbound
	for _, s := range strings.Split(allowPrivate, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return o, fmt.Errorf("SENDSTREAM_WEBHOOK_ALLOW_PRIVATE: %q is not a CIDR", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		o.AllowPrivate = append(o.AllowPrivate, p.Masked())
	}
	switch strings.ToLower(strings.TrimSpace(insecureTLS)) {
	case "", "0", "false":
	case "1", "true":
		o.InsecureTLS = true
	default:
		return o, fmt.Errorf("SENDSTREAM_WEBHOOK_INSECURE_TLS %q: want 1 or 0", insecureTLS)
	}
	return o, nil
}

// Warn logs a warning for each setting that weakens outgoing webhook.
// Call it once at start.
func (o Outbound) Warn(logger *slog.Logger) {
	if logger == nil {
		return
	}
	if len(o.AllowPrivate) > 0 {
		s := make([]string, len(o.AllowPrivate))
		for i, p := range o.AllowPrivate {
			s[i] = p.String()
		}
		logger.Warn("SENDSTREAM_WEBHOOK_ALLOW_PRIVATE is set: outgoing webhooks may reach these private ranges; for local development and tests only",
			"ranges", strings.Join(s, ","))
	}
	if o.InsecureTLS {
		logger.Warn("SENDSTREAM_WEBHOOK_INSECURE_TLS is set: outgoing webhooks accept any TLS certificate; for local development and tests only")
	}
}
