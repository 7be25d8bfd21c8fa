package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"sendstream/bench/load"
)

// whHang is how long the hanging receiver of phase (b) takes per call
// (issue 25: "one of 50 endpoints hanging 10 s per call").
const whHang = 10 * time.Second

// whVerifyEvery: one delivery in this many has its webhook-signature
// checked for real (HMAC-SHA256 under the endpoint's secret); every one
// must carry the headers.
const whVerifyEvery = 1000

// whReceiver is one endpoint's receiver: a TLS server of its own on
// 127.0.0.1 (its own host:port, as separate endpoints are in practice)
// answering 204, counting calls.
type whReceiver struct {
	idx  int
	url  string
	ln   net.Listener
	srv  *fasthttp.Server
	key  []byte // HMAC key of the endpoint's secret; set in Setup
	hang atomic.Bool

	ok       atomic.Int64 // answered 204 (any attempt)
	firsts   atomic.Int64 // of those, X-Webhook-Attempt 1
	retries  atomic.Int64 // calls with X-Webhook-Attempt > 1
	hung     atomic.Int64 // calls held for whHang
	unsigned atomic.Int64 // calls without webhook-signature or X-Signature-256
}

// whFleet is the 50 receivers of a run and what they observed together.
type whFleet struct {
	recv             []*whReceiver
	calls            atomic.Int64
	verified, badSig atomic.Int64
	firstBad         atomic.Value // string: why the first sampled signature failed

	// lat, when set, records first attempts of the domain events whose
	// intended send time falls in its window.
	lat atomic.Pointer[whLatency]
}

// whLatency collects the latency from a domain event (the harness's
// intended send time of its upsert, carried in the contact's email) to the
// first delivery attempt's arrival, and from the body's timestamp (the
// contact's createdAt) to that arrival.
type whLatency struct {
	phase      string
	from, to   int64 // intended send times [from, to) in unix ns
	fromSend   *load.Histogram
	fromStamp  *load.Histogram
	mu         sync.Mutex
	seen       map[[2]int64]bool // (send time, receiver) of recorded first attempts
	duplicates atomic.Int64
}

func newWhLatency(phase string, from, to time.Time) *whLatency {
	return &whLatency{phase: phase, from: from.UnixNano(), to: to.UnixNano(),
		fromSend: load.NewHistogram(), fromStamp: load.NewHistogram(), seen: map[[2]int64]bool{}}
}

var (
	whMu      sync.Mutex
	whCurrent *whFleet // the fleet of the webhooks benchmark running now
)

// startFleet starts n TLS receivers with one self-signed certificate.
func startFleet(n int) (*whFleet, error) {
	cert, err := selfSigned()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	f := &whFleet{}
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.close()
			return nil, fmt.Errorf("webhook receiver %d: %w", i, err)
		}
		r := &whReceiver{idx: i, ln: ln, url: fmt.Sprintf("https://%s/hooks/%d", ln.Addr(), i)}
		r.srv = &fasthttp.Server{Handler: f.handler(r), Name: "bench-receiver",
			Logger: log.New(io.Discard, "", 0), ReadBufferSize: 16 << 10}
		go func() { _ = r.srv.Serve(tls.NewListener(ln, cfg)) }()
		f.recv = append(f.recv, r)
	}
	return f, nil
}

// close stops accepting; calls still hanging end on their own.
func (f *whFleet) close() {
	for _, r := range f.recv {
		_ = r.ln.Close()
	}
}

// handler answers 204 after counting the call, checking one signature in
// whVerifyEvery and recording the latency of first attempts.
func (f *whFleet) handler(r *whReceiver) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		now := time.Now()
		n := f.calls.Add(1)
		attempt, _ := strconv.Atoi(string(ctx.Request.Header.Peek("X-Webhook-Attempt")))
		sig := ctx.Request.Header.Peek("webhook-signature")
		if len(sig) == 0 || len(ctx.Request.Header.Peek("X-Signature-256")) == 0 {
			r.unsigned.Add(1)
		} else if n%whVerifyEvery == 0 && r.key != nil {
			f.verify(r, ctx, sig)
		}
		if r.hang.Load() {
			r.hung.Add(1)
			time.Sleep(whHang)
			ctx.SetStatusCode(fasthttp.StatusNoContent)
			return
		}
		if attempt == 1 {
			r.firsts.Add(1)
			if l := f.lat.Load(); l != nil {
				l.record(r.idx, ctx.PostBody(), now)
			}
		} else {
			r.retries.Add(1)
		}
		r.ok.Add(1)
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	}
}

// verify checks the Standard Webhooks signature of one delivery:
// "v1," + base64 HMAC-SHA256 of "id.timestamp.body", one of the
// space-separated signatures.
func (f *whFleet) verify(r *whReceiver, ctx *fasthttp.RequestCtx, sig []byte) {
	m := hmac.New(sha256.New, r.key)
	m.Write(ctx.Request.Header.Peek("webhook-id"))
	m.Write([]byte{'.'})
	m.Write(ctx.Request.Header.Peek("webhook-timestamp"))
	m.Write([]byte{'.'})
	m.Write(ctx.PostBody())
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, s := range strings.Fields(string(sig)) {
		if hmac.Equal([]byte(s), []byte(want)) {
			f.verified.Add(1)
			return
		}
	}
	f.badSig.Add(1)
	f.firstBad.CompareAndSwap(nil, fmt.Sprintf("endpoint %d: webhook-signature %q does not match", r.idx, sig))
}

// record adds the latency of a first attempt whose body names a contact
// of this phase: email "wh-<phase>-<intended send ns>-<seq>@…".
func (l *whLatency) record(idx int, body []byte, now time.Time) {
	email := jsonString(body, `"email":"`)
	prefix := "wh-" + l.phase + "-"
	if !strings.HasPrefix(email, prefix) {
		return
	}
	rest := email[len(prefix):]
	ns, err := strconv.ParseInt(rest[:max(strings.IndexByte(rest, '-'), 0)], 10, 64)
	if err != nil || ns < l.from || ns >= l.to {
		return
	}
	l.mu.Lock()
	k := [2]int64{ns, int64(idx)}
	dup := l.seen[k]
	l.seen[k] = true
	l.mu.Unlock()
	if dup {
		l.duplicates.Add(1)
		return
	}
	l.fromSend.Record(now.Sub(time.Unix(0, ns)))
	if ts, err := time.Parse(time.RFC3339Nano, jsonString(body, `"timestamp":"`)); err == nil {
		l.fromStamp.Record(now.Sub(ts))
	}
}

// missing records, for each of the want first attempts of the window not
// seen by deadline, the time from its send to now (a lower bound of its
// latency), and returns how many there were.
func (l *whLatency) missing(sent []int64, receivers int, now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ns := range sent {
		for i := 0; i < receivers; i++ {
			if !l.seen[[2]int64{ns, int64(i)}] {
				n++
				l.fromSend.Record(now.Sub(time.Unix(0, ns)))
			}
		}
	}
	return n
}

// jsonString returns the JSON string value after key in body (no escapes
// expected: emails and timestamps), or "".
func jsonString(body []byte, key string) string {
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return ""
	}
	v := body[i+len(key):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return ""
	}
	return string(v[:j])
}

// okExcept sums the 204s of every receiver but skip (-1: all).
func (f *whFleet) okExcept(skip int) int64 {
	var n int64
	for _, r := range f.recv {
		if r.idx != skip {
			n += r.ok.Load()
		}
	}
	return n
}

// sum adds a counter over every receiver.
func (f *whFleet) sum(get func(*whReceiver) *atomic.Int64) int64 {
	var n int64
	for _, r := range f.recv {
		n += get(r).Load()
	}
	return n
}

// signatureError reports a sampled signature that did not verify, or that
// none was sampled.
func (f *whFleet) signatureError() error {
	if why, bad := f.firstBad.Load().(string); bad {
		return fmt.Errorf("%d sampled webhook signatures did not verify, the first: %s", f.badSig.Load(), why)
	}
	if f.verified.Load() == 0 {
		return errors.New("no webhook signature was sampled and verified")
	}
	if u := f.sum(func(r *whReceiver) *atomic.Int64 { return &r.unsigned }); u > 0 {
		return fmt.Errorf("%d deliveries came without webhook-signature or X-Signature-256", u)
	}
	return nil
}

// secretKey is the HMAC key of a secret: the base64-decoded remainder of a
// whsec_ secret, else the secret's bytes.
func secretKey(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if k, err := base64.StdEncoding.DecodeString(rest); err == nil {
			return k
		}
	}
	return []byte(secret)
}

// selfSigned makes an ECDSA P-256 certificate for 127.0.0.1 (the server
// runs with SENDSTREAM_WEBHOOK_INSECURE_TLS=1).
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("receiver key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench-receiver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("receiver certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// prepareFleet starts the receivers and lets the server reach them.
func prepareFleet(ctx context.Context, dir string) ([]string, func(), error) {
	f, err := startFleet(whEndpoints)
	if err != nil {
		return nil, nil, err
	}
	whMu.Lock()
	whCurrent = f
	whMu.Unlock()
	env := []string{"SENDSTREAM_WEBHOOK_ALLOW_PRIVATE=127.0.0.0/8", "SENDSTREAM_WEBHOOK_INSECURE_TLS=1"}
	return env, f.close, nil
}

func currentFleet() (*whFleet, error) {
	whMu.Lock()
	defer whMu.Unlock()
	if whCurrent == nil {
		return nil, errors.New("no webhook receivers")
	}
	return whCurrent, nil
}
