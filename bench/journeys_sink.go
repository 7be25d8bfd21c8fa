package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	gosmtp "github.com/emersion/go-smtp"
)

// jnSink is the SMTP server the journeys benchmark's server delivers to:
// it counts every message it accepts per recipient (RCPT TO), keeping
// nothing else, so the benchmark can tell a lost email (a recipient with
// none) from a doubled one (a recipient with two).
type jnSink struct {
	srv   *gosmtp.Server
	addr  string
	total atomic.Int64

	mu    sync.Mutex
	perTo map[string]int
}

// recipients returns a copy of the per-recipient counts.
func (s *jnSink) recipients() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.perTo))
	for k, v := range s.perTo {
		out[k] = v
	}
	return out
}

// jnSession is one SMTP transaction: its recipients, counted once its
// DATA is read.
type jnSession struct {
	s  *jnSink
	to []string
}

func (ss *jnSession) Reset()                                 { ss.to = ss.to[:0] }
func (ss *jnSession) Logout() error                          { return nil }
func (ss *jnSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (ss *jnSession) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	ss.to = append(ss.to, strings.ToLower(to))
	return nil
}

func (ss *jnSession) Data(r io.Reader) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	ss.s.mu.Lock()
	for _, to := range ss.to {
		ss.s.perTo[to]++
	}
	ss.s.mu.Unlock()
	ss.s.total.Add(int64(len(ss.to)))
	return nil
}

var (
	jnSinkMu      sync.Mutex
	jnSinkCurrent *jnSink // the sink of the journeys benchmark running now
)

// currentJnSink returns the running benchmark's sink.
func currentJnSink() (*jnSink, error) {
	jnSinkMu.Lock()
	defer jnSinkMu.Unlock()
	if jnSinkCurrent == nil {
		return nil, fmt.Errorf("journeys: no mail sink")
	}
	return jnSinkCurrent, nil
}

// prepareJnSink starts the sink and points the server at it (Prepare).
func prepareJnSink(ctx context.Context, dir string) ([]string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("mail sink: %w", err)
	}
	s := &jnSink{addr: ln.Addr().String(), perTo: map[string]int{}}
	s.srv = gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) { return &jnSession{s: s}, nil }))
	s.srv.Domain = "sink.bench.local"
	s.srv.MaxMessageBytes = 32 << 20
	s.srv.MaxRecipients = 100
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	go func() { _ = s.srv.Serve(ln) }()
	jnSinkMu.Lock()
	jnSinkCurrent = s
	jnSinkMu.Unlock()
	env := []string{"SENDSTREAM_SMTP_URL=smtp://" + s.addr + "?tls=none&pool=16"}
	return env, func() { _ = s.srv.Close() }, nil
}
