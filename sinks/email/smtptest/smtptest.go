// Package smtptest runs a real SMTP server (emersion/go-smtp) in the test
// process on 127.0.0.1 and captures what it receives, for tests of the SMTP
// provider, the delivery stage and the transactional API. It can offer
// STARTTLS with a throwaway certificate and SMTPUTF8, require AUTH PLAIN, refuse
// recipients, answer the end of data with an error, drop the connection
// after the data, and be stopped and restarted on the same port.
package smtptest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"
)

// Message is one message the server accepted.
type Message struct {
	From string
	To   []string
	Data []byte
	TLS  bool   // the session was encrypted
	User string // the authenticated user, if any
	// UTF8 says MAIL FROM carried the SMTPUTF8 parameter (RFC 6531).
	UTF8 bool
}

// Options configure a Server.
type Options struct {
	TLS      bool   // offer STARTTLS with a self-signed certificate for 127.0.0.1
	Username string // when set, AUTH PLAIN is required with these credentials
	Password string
	// Rcpt decides each RCPT; nil accepts all.
	Rcpt func(to string) error
	// Data decides the end of data after the message was read; nil
	// accepts. Return DropConnection to close without a reply.
	Data func(m Message) error
	// Delay is waited before answering each end of data.
	Delay time.Duration
	// Discard accepts messages without keeping them (benchmarks).
	Discard bool
	// SMTPUTF8 offers the SMTPUTF8 extension (RFC 6531). Without it the
	// server answers a MAIL FROM with the SMTPUTF8 parameter 504, as a
	// relay lacking the extension may, but still takes non-ASCII addresses
	// sent without the parameter, so a test sees what a client sent.
	SMTPUTF8 bool
}

// DropConnection, returned by Options.Data, makes the server close the
// connection without answering the end of data.
var DropConnection = errors.New("smtptest: drop the connection")

// Server is a running test SMTP server.
type Server struct {
	Addr string // 127.0.0.1:port
	// CertPool trusts the server's certificate (with Options.TLS).
	CertPool *x509.CertPool

	opt     Options
	tlsConf *tls.Config

	mu      sync.Mutex
	srv     *gosmtp.Server
	msgs    []Message
	conns   int
	notify  chan struct{}
	stopped bool
}

// Start runs a server until the test ends.
func Start(t testing.TB, opt Options) *Server {
	t.Helper()
	s := &Server{opt: opt, notify: make(chan struct{})}
	if opt.TLS {
		s.tlsConf, s.CertPool = selfSigned(t)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("smtptest: listen: %v", err)
	}
	s.Addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(func() { s.Stop() })
	return s
}

func (s *Server) serve(ln net.Listener) {
	srv := gosmtp.NewServer(gosmtp.BackendFunc(func(c *gosmtp.Conn) (gosmtp.Session, error) {
		s.mu.Lock()
		s.conns++
		s.mu.Unlock()
		return &session{s: s, conn: c}, nil
	}))
	srv.Domain = "smtptest.local"
	srv.TLSConfig = s.tlsConf
	srv.AllowInsecureAuth = !s.opt.TLS
	srv.ReadTimeout = time.Minute
	srv.WriteTimeout = time.Minute
	srv.MaxMessageBytes = 64 << 20
	srv.MaxRecipients = 100
	srv.EnableSMTPUTF8 = s.opt.SMTPUTF8
	srv.ErrorLog = nopLogger{}
	s.mu.Lock()
	s.srv = srv
	s.stopped = false
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Stop closes the listener and every connection; messages stay readable.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	already := s.stopped
	s.stopped = true
	s.mu.Unlock()
	if !already && srv != nil {
		_ = srv.Close()
	}
}

// Restart listens again on the same address after Stop.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", s.Addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("smtptest: listen again on %s: %v", s.Addr, err)
	}
	s.serve(ln)
}

// Messages returns a copy of every accepted message, in arrival order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Connections returns how many connections were opened so far.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Wait blocks until at least n messages arrived or timeout passes, and
// returns the messages.
func (s *Server) Wait(n int, timeout time.Duration) []Message {
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		got := len(s.msgs)
		ch := s.notify
		s.mu.Unlock()
		if got >= n {
			return s.Messages()
		}
		left := time.Until(deadline)
		if left <= 0 {
			return s.Messages()
		}
		select {
		case <-ch:
		case <-time.After(left):
		}
	}
}

func (s *Server) add(m Message) {
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	close(s.notify)
	s.notify = make(chan struct{})
	s.mu.Unlock()
}

type session struct {
	s    *Server
	conn *gosmtp.Conn
	from string
	to   []string
	user string
	utf8 bool
}

var _ gosmtp.AuthSession = (*session)(nil)

func (ss *session) AuthMechanisms() []string {
	if ss.s.opt.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain {
		return nil, gosmtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(identity, user, pass string) error {
		if user != ss.s.opt.Username || pass != ss.s.opt.Password {
			return gosmtp.ErrAuthFailed
		}
		ss.user = user
		return nil
	}), nil
}

func (ss *session) Reset()        { ss.from, ss.to, ss.utf8 = "", nil, false }
func (ss *session) Logout() error { return nil }

func (ss *session) Mail(from string, o *gosmtp.MailOptions) error {
	if ss.s.opt.Username != "" && ss.user == "" {
		return gosmtp.ErrAuthRequired
	}
	ss.from, ss.utf8 = from, o != nil && o.UTF8
	return nil
}

func (ss *session) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	if ss.s.opt.Rcpt != nil {
		if err := ss.s.opt.Rcpt(to); err != nil {
			return err
		}
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, r); err != nil {
		return err
	}
	_, isTLS := ss.conn.TLSConnectionState()
	m := Message{From: ss.from, To: append([]string(nil), ss.to...), Data: buf.Bytes(), TLS: isTLS, User: ss.user, UTF8: ss.utf8}
	if ss.s.opt.Delay > 0 {
		time.Sleep(ss.s.opt.Delay)
	}
	if ss.s.opt.Data != nil {
		if err := ss.s.opt.Data(m); err != nil {
			if errors.Is(err, DropConnection) {
				_ = ss.conn.Conn().Close()
			}
			return err
		}
	}
	if !ss.s.opt.Discard {
		ss.s.add(m)
	}
	return nil
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
func (nopLogger) Println(...any)        {}

// selfSigned makes a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t testing.TB) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "smtptest"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, pool
}

// Ctx returns a context for a test step, cancelled when the test ends.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
