// Package smtp is the SMTP provider plugin of sinks/email: a pool of reused
// connections (plain, STARTTLS or implicit TLS, optional AUTH PLAIN) to one
// relay, behind a circuit breaker, with retries only where the relay
// provably did not take the message. Its own client (client.go) sends a
// one-recipient message to a relay offering CHUNKING and PIPELINING as one
// write, MAIL, RCPT and "BDAT <size> LAST" with the message (RFC 3030), in
// one round trip. Otherwise it writes the envelope in one go when the relay
// offers PIPELINING and then the dot-stuffed message in one write: two
// round trips.
//
// Outcome of one Send, by where the transaction stopped:
//   - dial, greeting, TLS, AUTH, MAIL, RCPT of the primary recipient, DATA,
//     writing the message: nothing was accepted, so it is retried (once at
//     once on a fresh connection when a reused one turned out dead, then up
//     to MaxAttempts with backoff) and, failing that, returned as retryable;
//   - a 5xx reply to MAIL, the primary RCPT, DATA or the end of data (for a
//     chunked message, BDAT): a permanent *email.RefusedError;
//   - a 4xx reply to the end of data (BDAT): the relay said it did not take
//     the message, so it is retryable;
//   - a message with a non-ASCII address (email.Message.NeedsSMTPUTF8) to a
//     relay that does not offer SMTPUTF8: a permanent *email.RefusedError
//     saying so, before any command; where the relay offers it, MAIL FROM
//     carries the SMTPUTF8 parameter (RFC 6531), and only then;
//   - no reply to the end of data (connection lost, time-out): the relay may
//     have accepted it, so *email.UnknownOutcomeError and never a retry. A
//     chunked message is whole at the relay once written, so this holds for
//     a reply lost anywhere after that write; to keep it rare, a pooled
//     connection is checked without waiting (peerClosed) before reuse, and
//     one the relay closed while it sat idle is not used.
//
// Registered as provider "smtp"; settings: "url", e.g.
// smtp://user:pass@relay.example.com:587?tls=starttls&pool=8 (see ParseURL).
package smtp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/breaker"
	"sendstream/sinks/email"
)

func init() {
	email.Register("smtp", func(s map[string]string) (email.Provider, error) {
		cfg, err := ParseURL(s["url"])
		if err != nil {
			return nil, err
		}
		return New(cfg)
	})
}

// Provider sends through one SMTP relay. It is safe for concurrent use.
type Provider struct {
	cfg  Config
	slot chan struct{} // one token per connection allowed open
	mu   sync.Mutex
	idle []*conn
	// offersStartTLS records that the relay offered STARTTLS (opportunistic
	// mode).
	offersStartTLS atomic.Bool
}

var (
	_ email.Provider = (*Provider)(nil)
	_ email.Gate     = (*Provider)(nil)
	_ email.Bounded  = (*Provider)(nil)
)

// New returns a Provider; it connects on first use.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.withDefaults()
	return &Provider{cfg: cfg, slot: make(chan struct{}, cfg.PoolSize)}, nil
}

// Name returns "smtp".
func (p *Provider) Name() string { return "smtp" }

// Blocked reports whether the breaker is open (sends fail fast).
func (p *Provider) Blocked() bool { return p.cfg.Breaker.State() == "open" }

// MaxSends returns the pool size: how many Send calls run at once (the
// rest wait for a connection).
func (p *Provider) MaxSends() int { return p.cfg.PoolSize }

// Breaker returns the provider's circuit breaker.
func (p *Provider) Breaker() *breaker.Breaker { return p.cfg.Breaker }

// conn is one pooled connection.
type conn struct {
	c        *client
	nc       net.Conn // the TCP connection (under TLS when secured)
	lastUsed time.Time
	dirty    bool // a transaction was left unfinished: RSET before reuse
}

// Send hands m to the relay; see the package comment for the outcomes.
func (p *Provider) Send(ctx context.Context, m *email.Message) (email.Receipt, error) {
	if len(m.Recipients) == 0 {
		return email.Receipt{}, &email.RefusedError{Reason: "no recipients"}
	}
	select {
	case p.slot <- struct{}{}:
	case <-ctx.Done():
		return email.Receipt{}, ctx.Err()
	}
	defer func() { <-p.slot }()

	var lastErr error
	for attempt := 0; attempt < p.cfg.MaxAttempts; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(p.cfg.Backoff << (attempt - 1))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return email.Receipt{}, ctx.Err()
			}
		}
		var rec email.Receipt
		err := p.cfg.Breaker.Do(ctx, func(ctx context.Context) error {
			var err error
			rec, err = p.sendOnce(ctx, m)
			if email.IsRefused(err) {
				// Says nothing about the relay's health.
				return pipeline.Permanent(err)
			}
			return err
		})
		switch {
		case err == nil:
			return rec, nil
		case email.IsRefused(err), email.IsUnknownOutcome(err):
			return email.Receipt{}, unwrapPermanent(err)
		case errors.Is(err, breaker.ErrOpen), ctx.Err() != nil:
			return email.Receipt{}, err
		}
		lastErr = err
	}
	return email.Receipt{}, fmt.Errorf("smtp %s: %d attempts: %w", p.cfg.Addr, p.cfg.MaxAttempts, lastErr)
}

// unwrapPermanent strips the pipeline.Permanent marker added for the breaker.
func unwrapPermanent(err error) error {
	var r *email.RefusedError
	if errors.As(err, &r) {
		return r
	}
	var u *email.UnknownOutcomeError
	if errors.As(err, &u) {
		return u
	}
	return err
}

// sendOnce runs one transaction, on a pooled connection when one is idle;
// when that connection turns out dead before anything was accepted, it
// tries once more on a fresh one.
func (p *Provider) sendOnce(ctx context.Context, m *email.Message) (email.Receipt, error) {
	c := p.takeIdle()
	reused := c != nil
	for {
		if c == nil {
			var err error
			if c, err = p.dial(ctx); err != nil {
				return email.Receipt{}, err
			}
		}
		rec, err, keep := p.transact(ctx, c, m)
		if keep {
			p.putIdle(c)
		} else {
			_ = c.nc.Close()
		}
		if err != nil && reused && !keep && isSafeRetry(err) {
			reused, c = false, nil
			continue
		}
		return rec, err
	}
}

// isSafeRetry: a failure before the relay could have accepted anything.
func isSafeRetry(err error) bool {
	return !email.IsRefused(err) && !email.IsUnknownOutcome(err) && !isSMTPCode(err, 4)
}

func isSMTPCode(err error, class int) bool {
	return replyCode(err)/100 == class
}

// transact runs one mail transaction on c. keep reports whether c can be
// reused.
func (p *Provider) transact(ctx context.Context, c *conn, m *email.Message) (rec email.Receipt, err error, keep bool) {
	stop := context.AfterFunc(ctx, func() { _ = c.nc.Close() })
	defer stop()
	for _, a := range append([]string{m.From}, m.Recipients...) {
		if strings.ContainsAny(a, "\r\n<>") {
			return rec, &email.RefusedError{Reason: fmt.Sprintf("address %q cannot be sent in an SMTP command", a)}, true
		}
	}
	utf8 := m.NeedsSMTPUTF8()
	if utf8 && !c.c.has("SMTPUTF8") {
		return rec, &email.RefusedError{Reason: fmt.Sprintf("%s is not ASCII and needs SMTPUTF8 (RFC 6531), which the relay %s does not offer; nothing was sent",
			firstNonASCII(m), p.cfg.Addr)}, true
	}
	if c.dirty {
		if err := c.c.reset(); err != nil {
			return rec, fmt.Errorf("smtp %w", err), false
		}
		c.dirty = false
	}
	c.lastUsed = time.Now()
	o := c.c.send(m.From, m.Recipients, m.Raw, utf8)
	rec.Refused = o.refused
	code := replyCode(o.err) // 0: no reply (or no error)
	switch {
	case o.err == nil && o.stage == stageFinal:
		rec.ProviderMessageID = queueID(o.final)
		return rec, nil, true
	case o.stage == stageAborted:
		// The relay accepted DATA after refusing the primary recipient (or
		// the sender): closing the connection before the end of data
		// abandons the transaction.
		if code/100 == 5 {
			return email.Receipt{}, refusal(o), false
		}
		return email.Receipt{}, fmt.Errorf("smtp %s: %s", o.step, o.err), false
	case o.stage == stageFinal && code == 0:
		return email.Receipt{}, &email.UnknownOutcomeError{Err: o.err}, false
	case o.stage == stageFinal:
		if code/100 == 5 {
			return email.Receipt{}, refusal(o), true
		}
		// 421: the relay is closing the connection (RFC 5321 3.8).
		return email.Receipt{}, fmt.Errorf("smtp %s: %w", o.step, o.err), code != 421
	case code == 421:
		// The relay is closing this connection (an idle one timed out):
		// nothing was accepted, and a fresh connection may do, so this
		// is not reported as a 4xx reply, which sendOnce would not retry.
		return email.Receipt{}, fmt.Errorf("smtp %s: relay closing the connection: %s", o.step, o.err), false
	case code != 0:
		c.dirty = true
		if code/100 == 5 {
			return email.Receipt{}, refusal(o), true
		}
		return email.Receipt{}, fmt.Errorf("smtp %s: %w", o.step, o.err), true
	default:
		return email.Receipt{}, fmt.Errorf("smtp %s: %w", o.step, o.err), false
	}
}

// firstNonASCII names what makes m need SMTPUTF8: the first non-ASCII
// envelope address, or a header address.
func firstNonASCII(m *email.Message) string {
	for _, a := range append([]string{m.From}, m.Recipients...) {
		if schemas.HasNonASCII(a) {
			return "the address " + a
		}
	}
	return "an address in the header"
}

// refusal is the permanent error of a 5xx reply.
func refusal(o outcome) error {
	return &email.RefusedError{Reason: fmt.Sprintf("%s: %v", o.step, o.err)}
}

// queueID picks the relay's queue id from a final reply like
// "2.0.0 OK: queued as 4F2A1B" (the last word), or the whole text.
func queueID(text string) string {
	f := strings.Fields(text)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

func (p *Provider) takeIdle() *conn {
	for {
		p.mu.Lock()
		if len(p.idle) == 0 {
			p.mu.Unlock()
			return nil
		}
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		p.mu.Unlock()
		switch {
		case time.Since(c.lastUsed) >= p.cfg.IdleTimeout:
			go func() { c.c.quit(); _ = c.nc.Close() }()
		case c.c.r.Buffered() > 0 || peerClosed(c.nc):
			// The relay hung up, or spoke unasked (a 421 before hanging
			// up), while the connection sat idle.
			_ = c.nc.Close()
		default:
			return c
		}
	}
}

func (p *Provider) putIdle(c *conn) {
	c.lastUsed = time.Now()
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// dial opens, greets, secures and authenticates a connection.
func (p *Provider) dial(ctx context.Context) (*conn, error) {
	d := net.Dialer{Timeout: p.cfg.Timeout}
	var nc net.Conn
	var err error
	if p.cfg.TLS == TLSImplicit {
		nc, err = (&tls.Dialer{NetDialer: &d, Config: p.tlsConfig()}).DialContext(ctx, "tcp", p.cfg.Addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", p.cfg.Addr)
	}
	if err != nil {
		return nil, fmt.Errorf("smtp dial %s: %w", p.cfg.Addr, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
	defer stop()
	fail := func(step string, err error) (*conn, error) {
		_ = nc.Close()
		return nil, fmt.Errorf("smtp %s %s: %w", step, p.cfg.Addr, err)
	}
	c := newClient(nc, p.cfg.Timeout)
	if err := c.greet(p.cfg.Helo); err != nil {
		return fail("hello", err)
	}
	useTLS := p.cfg.TLS == TLSStartTLS
	if p.cfg.TLS == TLSOpportunistic {
		// Once the relay was seen to offer STARTTLS, every later
		// connection requires it, so a stripped offer fails rather than
		// silently sending in clear.
		if c.has("STARTTLS") {
			p.offersStartTLS.Store(true)
		}
		useTLS = p.offersStartTLS.Load()
	}
	if useTLS {
		if err := c.startTLS(ctx, p.tlsConfig(), p.cfg.Helo); err != nil {
			return fail("starttls", err)
		}
	}
	if p.cfg.Username != "" {
		if err := c.auth(p.cfg.Username, p.cfg.Password); err != nil {
			return fail("auth", err)
		}
	}
	return &conn{c: c, nc: nc, lastUsed: time.Now()}, nil
}

func (p *Provider) tlsConfig() *tls.Config {
	if p.cfg.TLSConfig != nil {
		return p.cfg.TLSConfig
	}
	host, _, _ := net.SplitHostPort(p.cfg.Addr)
	return &tls.Config{ServerName: host}
}

// Close quits every idle connection. Sends in progress finish first on
// their own connections, which are then closed by the garbage of the pool.
func (p *Provider) Close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		c.c.quit()
		_ = c.nc.Close()
	}
	return nil
}
