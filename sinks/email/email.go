// Package email is the outbound mail sink: the provider plugin interface and
// registry, the MIME builder, DKIM signing, and the signed one-click
// unsubscribe links. Providers live in sub-packages (sinks/email/smtp) and
// register themselves from init, like stages do.
//
// A provider never sends a message twice on its own: Send either reports
// that the transport accepted the message (nil), that it refused it
// (*RefusedError, permanent), that nothing was sent and a retry is safe
// (any other error), or that the outcome is unknown (*UnknownOutcomeError:
// the transport may have accepted it, so the caller must not retry).
package email

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"sendstream/schemas"
)

// Message is one built message ready for hand-off.
type Message struct {
	// ID is the service's message id. Providers with an idempotency key use
	// it, so a repeated hand-off is recognised by the provider.
	ID string
	// From is the envelope sender (SMTP MAIL FROM).
	From string
	// Recipients are every envelope recipient: to, cc and bcc. The first
	// is the primary recipient; a refusal of it fails the message.
	Recipients []string
	// Raw is the RFC 5322 message with CRLF line endings (DKIM-signed
	// when the sender's domain has a key).
	Raw []byte
}

// NeedsSMTPUTF8 reports whether the message can only travel in an SMTPUTF8
// transaction (RFC 6531): an envelope address or the header section holds
// a byte outside US-ASCII (a non-ASCII local part, which the address rule
// allows; display names and subjects are RFC 2047-encoded by Build and
// never count). A provider whose transport lacks the extension refuses such
// a message (*RefusedError) rather than send raw UTF-8.
func (m *Message) NeedsSMTPUTF8() bool {
	if schemas.HasNonASCII(m.From) {
		return true
	}
	for _, r := range m.Recipients {
		if schemas.HasNonASCII(r) {
			return true
		}
	}
	head := m.Raw
	if i := bytes.Index(head, []byte("\r\n\r\n")); i >= 0 {
		head = head[:i]
	}
	for _, c := range head {
		if c >= 0x80 {
			return true
		}
	}
	return false
}

// Receipt is what a provider reports for an accepted message.
type Receipt struct {
	// ProviderMessageID is the transport's id for the message, when it
	// gives one (an SMTP server's queue id from the final reply text).
	ProviderMessageID string
	// Refused lists secondary recipients (cc, bcc) the transport refused
	// while accepting the message for the others.
	Refused []string
}

// Provider hands messages to one mail transport. Send is called
// concurrently; it returns once the transport has answered. See the package
// comment for what its errors mean.
type Provider interface {
	Name() string
	Send(ctx context.Context, m *Message) (Receipt, error)
}

// RefusedError is a permanent refusal by the transport (an SMTP 5xx for the
// primary recipient or the content). Retrying cannot help.
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return "refused: " + e.Reason }

// UnknownOutcomeError says the message was transmitted but the transport's
// answer was lost (the connection broke after the end of the data). The
// transport may have accepted it, so it is never retried.
type UnknownOutcomeError struct {
	Err error
}

func (e *UnknownOutcomeError) Error() string {
	return "outcome unknown after the message was transmitted: " + e.Err.Error()
}

func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

// IsRefused reports whether err is a permanent refusal.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// IsUnknownOutcome reports whether err leaves the outcome unknown.
func IsUnknownOutcome(err error) bool {
	var u *UnknownOutcomeError
	return errors.As(err, &u)
}

// Factory opens a provider from its settings (for SMTP, "url"). It must not
// connect: the first Send does.
type Factory func(settings map[string]string) (Provider, error)

var (
	regMu     sync.Mutex
	factories = map[string]Factory{}
)

// Register adds a provider plugin under name; call it from init. It panics on
// an empty or duplicate name.
func Register(name string, f Factory) {
	if name == "" || f == nil {
		panic("email: incomplete provider registration")
	}
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := factories[name]; dup {
		panic("email: duplicate provider " + name)
	}
	factories[name] = f
}

// Open builds the provider registered under name.
func Open(name string, settings map[string]string) (Provider, error) {
	regMu.Lock()
	f, ok := factories[name]
	regMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("email: no provider %q (registered: %v)", name, Providers())
	}
	p, err := f(settings)
	if err != nil {
		return nil, fmt.Errorf("email: open provider %s: %w", name, err)
	}
	return p, nil
}

// Providers lists the registered provider names, sorted.
func Providers() []string {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]string, 0, len(factories))
	for n := range factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Gate is implemented by providers that know when their transport is down
// (an open circuit breaker): callers stop taking work while Blocked.
type Gate interface {
	Blocked() bool
}

// Bounded is implemented by providers that hand off at most MaxSends
// messages at once (the SMTP provider's connections): further Send calls
// wait for one to finish. A caller that takes something it cannot give
// back before sending (the delivery stage's claims) takes only about as
// much work as can be handed off.
type Bounded interface {
	MaxSends() int
}
