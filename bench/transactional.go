package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	gosmtp "github.com/emersion/go-smtp"
	"github.com/valyala/fasthttp"

	"sendstream/bench/harness"
	"sendstream/bench/load"
)

// Issue 5's targets.
//
//   - transactional-send: POST /api/v1/transactional/send (validation,
//     lookups, Liquid check, externalId claim in Postgres, durable broker
//     ack). Closed loop: capacity ≥ 5,000 accepted sends/s (pairs against
//     the bare JSON handler, ratio reported). Open loop at 1,000 sends/s:
//     p50 ≤ 3 ms, p99 ≤ 15 ms. This measures the HTTP edge: the server's
//     SMTP relay is a closed port, so the delivery stage's breaker opens and
//     it waits (the end-to-end benchmarks below measure delivery); every
//     other stage runs as usual.
//   - transactional-e2e: messages delivered end to end to a real SMTP server
//     (go-smtp, in this process, over loopback), ~4 KB each, without DKIM:
//     ≥ 3,000 messages/s; ratio to the slowest of the frozen Liquid render
//     and SMTP baselines reported.
//   - transactional-e2e-dkim: the same with RSA-2048 DKIM signing: ≥ 600
//     messages/s and ≥ 0.60× the slowest of the render, SMTP and DKIM
//     baselines measured in the same run.
//
// End to end, the system side of a pair is the number of messages the sink
// received during the measured window (Benchmark.Work): as many senders as
// the closed loop's connections (-conns, 64 by default, the method of
// PERFORMANCE.md; fewer left the send path latency-bound and the cores
// partly idle) keep a backlog of at most txBacklog accepted-but-undelivered
// messages, so the figure is the delivery rate, and the backlog drains
// within a second of the window's end (before the next baseline runs).
const txBacklog = 3000

func init() {
	harness.Register(harness.Benchmark{
		Name:      "transactional-send",
		Doc:       "POST /api/v1/transactional/send (lookups, Liquid check, externalId claim, durable ack): capacity and latency at 1,000/s",
		Issue:     5,
		Requires:  []string{"main.go", "ingest/transactional", "stages/delivery"},
		Baselines: []string{"http-json"},
		Prepare:   noRelay,
		Request: func(s *harness.System) *load.Request {
			return &load.Request{Method: "POST", URL: s.BaseURL + "/api/v1/transactional/send", Header: txAuth(s),
				ContentType: "application/json", Vary: sendBody("")}
		},
		OpenLoop: []harness.OpenLoop{{Rate: 1000, P50Max: 3 * time.Millisecond, P99Max: 15 * time.Millisecond}},
		Targets:  harness.Targets{MinOpsPerSec: 5000},
	})
	harness.Register(harness.Benchmark{
		Name:      "transactional-e2e",
		Doc:       "sends delivered end to end to an SMTP server on loopback, ~4 KB messages, no DKIM (messages/s)",
		Issue:     5,
		Requires:  []string{"main.go", "ingest/transactional", "stages/delivery"},
		Baselines: []string{"liquid-render", "smtp-sink"},
		Prepare:   prepareSink(false),
		Request: func(s *harness.System) *load.Request {
			return &load.Request{Method: "POST", URL: s.BaseURL + "/api/v1/transactional/send", Header: txAuth(s),
				ContentType: "application/json", Vary: sendBody("")}
		},
		Work:    e2eWork(""),
		Targets: harness.Targets{MinOpsPerSec: 3000},
	})
	harness.Register(harness.Benchmark{
		Name:      "transactional-e2e-dkim",
		Doc:       "sends delivered end to end with RSA-2048 DKIM signatures, ~4 KB messages (messages/s)",
		Issue:     5,
		Requires:  []string{"main.go", "ingest/transactional", "stages/delivery"},
		Baselines: []string{"liquid-render", "smtp-sink", "dkim-sign"},
		Prepare:   prepareSink(true),
		Setup: func(ctx context.Context, s *harness.System) error {
			var out struct {
				Name   string `json:"dkimRecordName"`
				Record string `json:"dkimRecord"`
			}
			if err := s.Admin(ctx, &out, "domain", "add", "--workspace", s.WorkspaceID, "--domain", "shop.bench.example.com"); err != nil {
				return err
			}
			if out.Name == "" || out.Record == "" {
				return errors.New("domain add printed no DKIM record")
			}
			sk := sinkOf(s)
			if sk == nil {
				return errors.New("no mail sink")
			}
			sinkMu.Lock()
			defer sinkMu.Unlock()
			sk.dkimName, sk.dkimRecord = out.Name, out.Record
			return nil
		},
		Request: func(s *harness.System) *load.Request {
			return &load.Request{Method: "POST", URL: s.BaseURL + "/api/v1/transactional/send", Header: txAuth(s),
				ContentType: "application/json", Vary: sendBody("orders@shop.bench.example.com")}
		},
		Work:    e2eWork("orders@shop.bench.example.com"),
		Targets: harness.Targets{MinOpsPerSec: 600, MinRatio: 0.60},
	})
}

func txAuth(s *harness.System) [][2]string {
	return [][2]string{{"Authorization", "Bearer " + s.APIKey}}
}

// txHTML is the message body: a receipt of about 2 KB whose rendered HTML,
// derived text part and headers make a message of about 4 KB.
//
//go:embed receipt.html
var txHTML string

// sendBody returns the Vary function of send bodies: a unique recipient
// and externalId per request, the receipt template with its data.
func sendBody(from string) func(dst []byte, n uint64) []byte {
	prefix := []byte(`{"to":"u`)
	var fromField []byte
	if from != "" {
		fromField = []byte(`,"fromEmail":"` + from + `"`)
	}
	html := strconvQuote(txHTML)
	return func(dst []byte, n uint64) []byte {
		dst = append(dst, prefix...)
		dst = strconv.AppendUint(dst, n%1000000, 10)
		dst = append(dst, `@bench.example.com","externalId":"tx-`...)
		dst = strconv.AppendUint(dst, n, 10)
		dst = append(dst, `-`...)
		dst = append(dst, runID...)
		dst = append(dst, `","subject":"Your order {{ order.number }} is confirmed","htmlContent":`...)
		dst = append(dst, html...)
		dst = append(dst, fromField...)
		dst = append(dst, `,"data":{"name":"Ada","order":{"number":"`...)
		dst = strconv.AppendUint(dst, 100000+n, 10)
		dst = append(dst, `","date":"2025-01-02","currency":"EUR","total":"86.50","items":[{"name":"Green tea, 250 g","quantity":2,"price":"12.50"},{"name":"Ceramic teapot <blue>","quantity":1,"price":"49.00"},{"name":"Bamboo whisk","quantity":1,"price":"12.50"}]},"address":{"line1":"12 Example Street","city":"Berlin","zip":"10115"}}}`...)
		return dst
	}
}

// runID keeps externalIds of different bench runs apart (the stack's
// Postgres outlives them).
var runID = strconv.FormatInt(time.Now().UnixNano(), 36)

func strconvQuote(s string) []byte {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '<':
			b.WriteString(`\u003c`)
		case '>':
			b.WriteString(`\u003e`)
		case '&':
			b.WriteString(`\u0026`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.Bytes()
}

// sink is the SMTP server the system delivers to: it reads each message
// and counts it (and its size), keeping nothing. With checkDKIM it counts
// the messages that start with a DKIM-Signature, and verifies one signed
// message in verifyEvery against the domain's published key.
type sink struct {
	srv       *gosmtp.Server
	addr      string
	count     atomic.Int64
	bytes     atomic.Int64
	signed    atomic.Int64
	checkDKIM bool

	dkimName, dkimRecord string // the TXT record: set in Setup, before any send
	verified, badSig     atomic.Int64
	firstBad             atomic.Value // string: why the first bad signature failed
}

// verifyEvery is how often the DKIM sink checks a signature for real.
const verifyEvery = 500

type sinkSession struct{ s *sink }

func (sinkSession) Reset()                                 {}
func (sinkSession) Logout() error                          { return nil }
func (sinkSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (sinkSession) Rcpt(string, *gosmtp.RcptOptions) error { return nil }
func (ss sinkSession) Data(r io.Reader) error {
	var head [16]byte
	n, _ := io.ReadFull(r, head[:])
	signed := ss.s.checkDKIM && bytes.HasPrefix(head[:n], []byte("DKIM-Signature"))
	size := int64(n)
	if signed && ss.s.signed.Add(1)%verifyEvery == 1 {
		msg, err := io.ReadAll(io.MultiReader(bytes.NewReader(head[:n]), r))
		if err != nil {
			return err
		}
		ss.s.verify(msg)
		size = int64(len(msg))
	} else {
		rest, err := io.Copy(io.Discard, r)
		if err != nil {
			return err
		}
		size += rest
	}
	ss.s.bytes.Add(size)
	ss.s.count.Add(1)
	return nil
}

// verify checks msg's DKIM signature against the record Setup published.
func (s *sink) verify(msg []byte) {
	lookup := func(name string) ([]string, error) {
		if name != s.dkimName {
			return nil, fmt.Errorf("no TXT record %s", name)
		}
		return []string{s.dkimRecord}, nil
	}
	vs, err := dkim.VerifyWithOptions(bytes.NewReader(msg), &dkim.VerifyOptions{LookupTXT: lookup})
	switch {
	case err != nil:
	case len(vs) != 1:
		err = fmt.Errorf("%d signatures", len(vs))
	default:
		err = vs[0].Err
	}
	if err != nil {
		s.badSig.Add(1)
		s.firstBad.CompareAndSwap(nil, err.Error())
		return
	}
	s.verified.Add(1)
}

var (
	sinkMu sync.Mutex
	sinks  = map[string]*sink{} // by the scratch directory of the system it serves
)

// sinkOf returns the mail sink that Prepare started for system s (two in
// an A/B run).
func sinkOf(s *harness.System) *sink {
	sinkMu.Lock()
	defer sinkMu.Unlock()
	return sinks[s.Dir]
}

// prepareSink starts the sink and points the server at it.
func prepareSink(dkim bool) func(ctx context.Context, dir string) ([]string, func(), error) {
	return func(ctx context.Context, dir string) ([]string, func(), error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("mail sink: %w", err)
		}
		s := &sink{addr: ln.Addr().String(), checkDKIM: dkim}
		s.srv = gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) { return sinkSession{s}, nil }))
		s.srv.Domain = "sink.bench.local"
		s.srv.MaxMessageBytes = 32 << 20
		s.srv.ErrorLog = log.New(io.Discard, "", 0)
		go func() { _ = s.srv.Serve(ln) }()
		sinkMu.Lock()
		sinks[dir] = s
		sinkMu.Unlock()
		env := []string{"SENDSTREAM_SMTP_URL=smtp://" + s.addr + "?tls=none&pool=16"}
		return env, func() {
			_ = s.srv.Close()
			sinkMu.Lock()
			delete(sinks, dir)
			sinkMu.Unlock()
		}, nil
	}
}

// noRelay points the server's SMTP relay at a port nothing listens on.
func noRelay(ctx context.Context, dir string) ([]string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return []string{"SENDSTREAM_SMTP_URL=smtp://" + addr + "?tls=none"}, nil, nil
}

// e2eWork drives sends and counts deliveries at the sink in the window.
func e2eWork(from string) func(ctx context.Context, s *harness.System, w load.Window) (float64, error) {
	return func(ctx context.Context, s *harness.System, w load.Window) (float64, error) {
		sk := sinkOf(s)
		if sk == nil {
			return 0, errors.New("no mail sink")
		}
		body := sendBody(from)
		var seq atomic.Uint64
		seq.Store(uint64(time.Now().UnixNano()) & 0xffffffffff)
		senders := max(w.Conns, 1)
		client := load.NewClient(s.Addr, senders)
		url := s.BaseURL + "/api/v1/transactional/send"
		do := func(buf []byte) ([]byte, int, error) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(url)
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/json")
			req.Header.Set("Authorization", "Bearer "+s.APIKey)
			buf = body(buf[:0], seq.Add(1))
			req.SetBodyRaw(buf)
			err := client.DoTimeout(req, resp, 30*time.Second)
			return buf, resp.StatusCode(), err
		}
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		var accepted atomic.Int64
		var failed atomic.Int64
		var firstErr atomic.Value
		base := sk.count.Load()
		var wg sync.WaitGroup
		for i := 0; i < senders; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var buf []byte
				for runCtx.Err() == nil {
					if accepted.Load()-(sk.count.Load()-base) >= txBacklog {
						time.Sleep(2 * time.Millisecond)
						continue
					}
					var st int
					var err error
					buf, st, err = do(buf)
					switch {
					case err != nil:
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						time.Sleep(10 * time.Millisecond)
					case st/100 == 2:
						accepted.Add(1)
					default:
						failed.Add(1)
						firstErr.CompareAndSwap(nil, fmt.Sprintf("status %d", st))
					}
				}
			}()
		}
		sleep := func(d time.Duration) error {
			select {
			case <-time.After(d):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := sleep(w.Warmup); err != nil {
			return 0, err
		}
		start := sk.count.Load()
		startBytes := sk.bytes.Load()
		if w.OnStart != nil {
			w.OnStart()
		}
		if err := sleep(w.Duration); err != nil {
			return 0, err
		}
		end := sk.count.Load()
		endBytes := sk.bytes.Load()
		if w.OnEnd != nil {
			w.OnEnd()
		}
		stop()
		wg.Wait()
		// Let the backlog drain so the next baseline runs on an idle server.
		deadline := time.Now().Add(30 * time.Second)
		for sk.count.Load()-base < accepted.Load() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		n := end - start
		avg := int64(0)
		if n > 0 {
			avg = (endBytes - startBytes) / n
		}
		msg := fmt.Sprintf("transactional e2e: %d delivered in the window (%.0f/s), average %d bytes, %d accepted in all, %d failed sends",
			n, float64(n)/w.Duration.Seconds(), avg, accepted.Load(), failed.Load())
		if sk.checkDKIM {
			msg += fmt.Sprintf(", %d of %d DKIM-signed, %d of %d sampled signatures verified",
				sk.signed.Load(), sk.count.Load(), sk.verified.Load(), sk.verified.Load()+sk.badSig.Load())
		}
		if e, ok := firstErr.Load().(string); ok {
			msg += ", first failure: " + strings.TrimSpace(e)
		}
		log.Print(msg)
		if why, bad := sk.firstBad.Load().(string); bad {
			return 0, fmt.Errorf("%d sampled DKIM signatures did not verify, the first: %s", sk.badSig.Load(), why)
		}
		if sk.checkDKIM && sk.verified.Load() == 0 {
			return 0, errors.New("no DKIM signature was verified")
		}
		if sk.checkDKIM && sk.signed.Load() != sk.count.Load() {
			return 0, fmt.Errorf("%d of %d messages were not DKIM-signed", sk.count.Load()-sk.signed.Load(), sk.count.Load())
		}
		if failed.Load() > 0 && accepted.Load() == 0 {
			return 0, fmt.Errorf("no send was accepted: %v", firstErr.Load())
		}
		return float64(n), nil
	}
}
