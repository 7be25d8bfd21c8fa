package smtp

// The provider's settings: Config, its defaults and checks, and ParseURL
// (the "url" setting of provider "smtp").

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"sendstream/sinks/breaker"
)

// TLSMode says how the connection is secured.
type TLSMode string

const (
	// TLSOpportunistic uses STARTTLS when the relay offers it (default).
	TLSOpportunistic TLSMode = "opportunistic"
	// TLSStartTLS requires STARTTLS.
	TLSStartTLS TLSMode = "starttls"
	// TLSImplicit connects with TLS from the start (smtps, port 465).
	TLSImplicit TLSMode = "implicit"
	// TLSNone never uses TLS.
	TLSNone TLSMode = "none"
)

// Config configures a Provider. Zero values take the defaults noted.
type Config struct {
	Addr      string  // host:port; required
	TLS       TLSMode // default TLSOpportunistic
	TLSConfig *tls.Config
	Username  string // AUTH PLAIN when set
	Password  string
	Helo      string // EHLO name (default "localhost")
	// PoolSize is the most connections open at once, which is also how
	// many messages are in flight (default 8).
	PoolSize int
	// IdleTimeout closes connections unused for this long instead of
	// reusing them (default 30s).
	IdleTimeout time.Duration
	// Timeout bounds each command and the wait for the final reply
	// (default 30s).
	Timeout time.Duration
	// MaxAttempts bounds tries of one Send for retryable failures (default 3).
	MaxAttempts int
	// Backoff between attempts, doubled each time (default 100ms).
	Backoff time.Duration
	// Breaker guards the relay (default breaker.New("smtp "+Addr)).
	Breaker *breaker.Breaker
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("smtp: address %q: %w", c.Addr, err)
	}
	switch c.TLS {
	case "", TLSOpportunistic, TLSStartTLS, TLSImplicit, TLSNone:
	default:
		return fmt.Errorf("smtp: tls mode %q (want opportunistic, starttls, implicit or none)", c.TLS)
	}
	if c.PoolSize < 0 || c.MaxAttempts < 0 {
		return errors.New("smtp: negative pool size or attempts")
	}
	return nil
}

func (c *Config) withDefaults() {
	if c.TLS == "" {
		c.TLS = TLSOpportunistic
	}
	if c.Helo == "" {
		c.Helo = "localhost"
	}
	if c.PoolSize == 0 {
		c.PoolSize = 8
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 30 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 3
	}
	if c.Backoff <= 0 {
		c.Backoff = 100 * time.Millisecond
	}
	if c.Breaker == nil {
		c.Breaker = breaker.New("smtp " + c.Addr)
	}
}

// ParseURL reads smtp://[user[:pass]@]host[:port][?tls=…&pool=N&helo=name&insecure=1]
// or smtps://… (implicit TLS, default port 465). The default port of smtp://
// is 25. insecure=1 skips certificate verification (local relays only);
// breaker_failures=N and breaker_open=10s tune the circuit breaker.
func ParseURL(raw string) (Config, error) {
	var c Config
	u, err := url.Parse(raw)
	if err != nil {
		return c, fmt.Errorf("smtp url: %w", err)
	}
	port := "25"
	switch u.Scheme {
	case "smtp":
	case "smtps":
		c.TLS, port = TLSImplicit, "465"
	default:
		return c, fmt.Errorf("smtp url %q: scheme must be smtp or smtps", raw)
	}
	host := u.Hostname()
	if host == "" {
		return c, fmt.Errorf("smtp url %q: no host", raw)
	}
	if u.Port() != "" {
		port = u.Port()
	}
	c.Addr = net.JoinHostPort(host, port)
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	q := u.Query()
	if v := q.Get("tls"); v != "" {
		c.TLS = TLSMode(v)
	}
	if v := q.Get("pool"); v != "" {
		if c.PoolSize, err = strconv.Atoi(v); err != nil || c.PoolSize < 1 {
			return c, fmt.Errorf("smtp url: pool %q: want a positive number", v)
		}
	}
	c.Helo = q.Get("helo")
	if v := q.Get("breaker_open"); v != "" || q.Get("breaker_failures") != "" {
		bc := breaker.Config{}
		if v != "" {
			if bc.OpenFor, err = time.ParseDuration(v); err != nil {
				return c, fmt.Errorf("smtp url: breaker_open %q: %w", v, err)
			}
		}
		if v := q.Get("breaker_failures"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return c, fmt.Errorf("smtp url: breaker_failures %q: want a positive number", v)
			}
			bc.ConsecutiveFailures = uint32(n)
		}
		c.Breaker = bc.New("smtp " + c.Addr)
	}
	c.TLSConfig = &tls.Config{ServerName: host, InsecureSkipVerify: q.Get("insecure") == "1"} //nolint:gosec // opt-in for local relays
	return c, c.Validate()
}
