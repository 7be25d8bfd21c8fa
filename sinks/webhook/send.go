package webhook

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

// Header names every delivery carries (spec 6).
const (
	HeaderEvent   = "X-Webhook-Event"
	HeaderAttempt = "X-Webhook-Attempt"
)

// MaxErrorText bounds the error text of a failed attempt (bytes): a
// receiver's answer or a transport error is cut to it and made valid
// UTF-8 before it is logged.
const MaxErrorText = 512

// Request is one delivery attempt.
type Request struct {
	URL     string
	Event   string // X-Webhook-Event
	Attempt int    // X-Webhook-Attempt
	// MessageID is the webhook-id of a signed delivery.
	MessageID string
	Body      []byte
	// Secrets sign the attempt (none: unsigned).
	Secrets []string
}

// Result is the outcome of one attempt.
type Result struct {
	StatusCode int // 0: no answer
	// RetryAfter is the Retry-After of a 429 or 503 answer (0: none or
	// unparsable).
	RetryAfter time.Duration
	Duration   time.Duration
	// Err is the bounded error text of a failed attempt ("" on 2xx).
	Err string
}

// OK reports a 2xx answer.
func (r Result) OK() bool { return r.StatusCode >= 200 && r.StatusCode < 300 && r.Err == "" }

// Send POSTs one attempt with c (a Guard.Client) and a deadline of timeout:
// Content-Type application/json, X-Webhook-Event, X-Webhook-Attempt and,
// with secrets, the Standard Webhooks headers and X-Signature-256 signed at
// now. Redirects are not followed (a 3xx is a failure). Nothing a receiver
// sends makes it fail other than as a Result: a transport error, a body
// over the client's limit or a non-2xx answer are a bounded Err text. ctx
// cancellation ends the wait early.
func Send(ctx context.Context, c *fasthttp.Client, timeout time.Duration, r Request, now time.Time) Result {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(r.URL)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set(HeaderEvent, r.Event)
	req.Header.Set(HeaderAttempt, strconv.Itoa(r.Attempt))
	Sign(r.Secrets, r.MessageID, now, r.Body).Headers(req.Header.Set)
	req.SetBody(r.Body)

	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- c.DoDeadline(req, resp, deadline) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// The request goroutine ends by the deadline; wait for it so the
		// pooled request and response are not released under it.
		<-done
		err = ctx.Err()
	}
	res := Result{Duration: time.Since(start)}
	if err != nil {
		if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) {
			err = fmt.Errorf("no answer within %s: %w", timeout, err)
		}
		res.Err = Bound(err.Error())
		return res
	}
	res.StatusCode = resp.StatusCode()
	if res.StatusCode == 429 || res.StatusCode == 503 {
		res.RetryAfter = parseRetryAfter(string(resp.Header.Peek("Retry-After")), now)
	}
	if !res.OK() {
		msg := "HTTP " + strconv.Itoa(res.StatusCode)
		if loc := resp.Header.Peek("Location"); len(loc) > 0 {
			msg += " (redirect to " + string(loc) + ", not followed)"
		}
		if b := resp.Body(); len(b) > 0 {
			msg += ": " + string(b[:min(len(b), MaxErrorText)])
		}
		res.Err = Bound(msg)
	}
	return res
}

// Bound cuts s to MaxErrorText bytes of valid UTF-8.
func Bound(s string) string {
	if len(s) > MaxErrorText {
		s = s[:MaxErrorText]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	for len(s) > MaxErrorText {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or
// unparsable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(1<<31))) * time.Second
	}
	if t, err := time.Parse(time.RFC1123, v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
