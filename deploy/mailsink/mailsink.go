// Package mailsink is a local development mail server: an SMTP server
// (emersion/go-smtp) that accepts every message, with or without AUTH and
// without TLS, stores it as an .eml file plus a JSON index, and a web inbox
// to read what was sent. `sendstream mailsink` runs it; `make run` starts it
// on 127.0.0.1:1025 (the default SENDSTREAM_SMTP_URL) with the inbox at
// http://127.0.0.1:1080. It is not a relay: nothing is ever delivered.
//
// The inbox (HTTP, loopback only):
//
//	GET    /                      messages, newest first
//	GET    /messages/{id}         headers, the HTML body in a sandboxed iframe, the text body
//	GET    /messages/{id}.eml     the raw message, byte for byte as received
//	GET    /api/messages          {"messages":[Meta…]}, newest first; ?to=ADDR filters by recipient
//	GET    /api/messages/{id}     Meta plus headers, text, html and attachments
//	DELETE /api/messages          deletes every message: {"deleted":N}
package mailsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"
)

// Defaults of Config.
const (
	DefaultSMTPAddr    = "127.0.0.1:1025"
	DefaultHTTPAddr    = "127.0.0.1:1080"
	DefaultDir         = ".run/mail"
	DefaultMaxMessages = 1000
	DefaultMaxBytes    = 30 << 20
)

// Config configures a Sink. Zero fields take the defaults.
type Config struct {
	SMTPAddr    string       // SMTP listen address; a loopback host
	HTTPAddr    string       // web inbox listen address; a loopback host
	Dir         string       // where the .eml files and index.json are kept
	MaxMessages int          // messages kept; the oldest beyond it are deleted
	MaxBytes    int64        // largest message accepted (SMTP SIZE); larger ones get 552
	Logger      *slog.Logger // one line per message received; nil discards
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.SMTPAddr == "" {
		c.SMTPAddr = DefaultSMTPAddr
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	if c.MaxMessages == 0 {
		c.MaxMessages = DefaultMaxMessages
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports a configuration the sink cannot run with. Both listen
// addresses must be on loopback: the sink has no authentication and shows
// every message to whoever asks.
func (c Config) Validate() error {
	for _, a := range []struct{ flag, addr string }{{"smtp", c.SMTPAddr}, {"http", c.HTTPAddr}} {
		if err := checkLoopback(a.addr); err != nil {
			return fmt.Errorf("mailsink: %s address: %w", a.flag, err)
		}
	}
	if c.Dir == "" {
		return errors.New("mailsink: empty directory")
	}
	if c.MaxMessages < 1 {
		return fmt.Errorf("mailsink: max messages must be at least 1, got %d", c.MaxMessages)
	}
	if c.MaxBytes < 1024 {
		return fmt.Errorf("mailsink: max message size must be at least 1024 bytes, got %d", c.MaxBytes)
	}
	return nil
}

func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q: bad port", addr)
	}
	if !isLoopbackHost(host) {
		return fmt.Errorf("%q: only loopback addresses (127.0.0.1, ::1, localhost) are allowed", addr)
	}
	return nil
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Sink is a running mail sink: both listeners are bound by Open; Serve
// serves them until its context ends.
type Sink struct {
	cfg    Config
	store  *Store
	lock   *os.File // flock on the directory: one sink per directory
	smtp   *gosmtp.Server
	web    *http.Server
	smtpLn net.Listener
	webLn  net.Listener

	mu       sync.Mutex
	closing  bool
	inflight sync.WaitGroup // Data calls writing to the store
	closed   bool
}

// Open validates cfg, opens the store and binds both listeners. The caller
// must call Serve or Close.
func Open(cfg Config) (*Sink, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("mailsink: create %s: %w", cfg.Dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(cfg.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("mailsink: open lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("mailsink: another mailsink uses %s: %w", cfg.Dir, err)
	}
	s := &Sink{cfg: cfg, lock: lock}
	fail := func(err error) (*Sink, error) {
		s.closeListeners()
		lock.Close()
		return nil, err
	}
	if s.store, err = OpenStore(cfg.Dir, cfg.MaxMessages); err != nil {
		return fail(err)
	}
	if s.smtpLn, err = net.Listen("tcp", cfg.SMTPAddr); err != nil {
		return fail(fmt.Errorf("mailsink: listen smtp: %w", err))
	}
	if s.webLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return fail(fmt.Errorf("mailsink: listen http: %w", err))
	}

	srv := gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) {
		return &session{sink: s}, nil
	}))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true // any AUTH, over plain text: this is a sink
	srv.MaxMessageBytes = cfg.MaxBytes
	srv.MaxRecipients = 1000
	srv.EnableSMTPUTF8 = true
	srv.ReadTimeout = 5 * time.Minute
	srv.WriteTimeout = time.Minute
	srv.ErrorLog = smtpLogger{cfg.Logger}
	s.smtp = srv

	s.web = &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// SMTPAddr is the address the SMTP server listens on.
func (s *Sink) SMTPAddr() string { return s.smtpLn.Addr().String() }

// InboxURL is the web inbox's root URL, e.g. http://127.0.0.1:1080.
func (s *Sink) InboxURL() string { return "http://" + s.webLn.Addr().String() }

// Store is the sink's message store.
func (s *Sink) Store() *Store { return s.store }

// Serve serves SMTP and HTTP until ctx ends or Close is called (then returns
// nil) or a listener fails (then returns its error). Either way it shuts both down, lets
// messages being stored finish, and releases the directory.
func (s *Sink) Serve(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- s.smtp.Serve(s.smtpLn) }()
	go func() { errc <- s.web.Serve(s.webLn) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed || err == nil || errors.Is(err, http.ErrServerClosed) {
			err = nil // Close was called
		} else {
			err = fmt.Errorf("mailsink: serve: %w", err)
		}
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close stops both servers at once (open SMTP connections are dropped; a
// message being written is finished first) and releases the directory.
func (s *Sink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed, s.closing = true, true
	s.mu.Unlock()

	_ = s.smtp.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.web.Shutdown(sctx); err != nil {
		_ = s.web.Close()
	}
	s.closeListeners()
	s.inflight.Wait()
	return s.lock.Close()
}

func (s *Sink) closeListeners() {
	for _, l := range []net.Listener{s.smtpLn, s.webLn} {
		if l != nil {
			_ = l.Close()
		}
	}
}

// begin registers a message about to be stored; false once Close started.
func (s *Sink) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.inflight.Add(1)
	return true
}

// errShuttingDown is the answer to DATA while the sink stops.
var errShuttingDown = &gosmtp.SMTPError{Code: 421, EnhancedCode: gosmtp.EnhancedCode{4, 3, 2}, Message: "Mail sink shutting down"}

// session is one SMTP connection's transaction state.
type session struct {
	sink *Sink
	user string
	from string
	rcpt []string
}

var _ gosmtp.AuthSession = (*session)(nil)

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain, sasl.Login} }

// Auth accepts any user name and password.
func (s *session) Auth(mech string) (sasl.Server, error) {
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(_, user, _ string) error {
			s.user = user
			return nil
		}), nil
	case sasl.Login:
		return &loginServer{done: func(user string) { s.user = user }}, nil
	}
	return nil, gosmtp.ErrAuthUnknownMechanism
}

func (s *session) Mail(from string, _ *gosmtp.MailOptions) error {
	s.from, s.rcpt = from, nil
	return nil
}

func (s *session) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	s.rcpt = append(s.rcpt, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	if !s.sink.begin() {
		return errShuttingDown
	}
	defer s.sink.inflight.Done()
	// go-smtp stops the reader at MaxMessageBytes with ErrDataTooLarge (552).
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m, err := s.sink.store.Add(Envelope{MailFrom: s.from, RcptTo: s.rcpt, AuthUser: s.user}, raw)
	if err != nil {
		s.sink.cfg.Logger.Error("mailsink: store failed", "err", err)
		return &gosmtp.SMTPError{Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 3, 0}, Message: "Could not store the message"}
	}
	s.sink.cfg.Logger.Info("mail received", "id", m.ID, "from", s.from, "to", s.rcpt,
		"subject", m.Subject, "size", m.Size, "url", s.sink.InboxURL()+"/messages/"+m.ID)
	return nil
}

func (s *session) Reset() { s.from, s.rcpt = "", nil }

func (s *session) Logout() error { return nil }

// loginServer is the server side of AUTH LOGIN (go-sasl has only the client):
// it asks for a user name and a password and accepts any.
type loginServer struct {
	step int
	user string
	done func(user string)
}

func (l *loginServer) Next(resp []byte) ([]byte, bool, error) {
	switch l.step {
	case 0: // AUTH LOGIN, with the user name as initial response or not
		if len(resp) == 0 {
			l.step = 1
			return []byte("Username:"), false, nil
		}
		l.user, l.step = string(resp), 2
		return []byte("Password:"), false, nil
	case 1:
		l.user, l.step = string(resp), 2
		return []byte("Password:"), false, nil
	default:
		l.done(l.user)
		return nil, true, nil
	}
}

// smtpLogger sends go-smtp's connection errors to the sink's logger.
type smtpLogger struct{ l *slog.Logger }

func (s smtpLogger) Printf(format string, v ...any) { s.l.Warn(fmt.Sprintf(format, v...)) }
func (s smtpLogger) Println(v ...any)               { s.l.Warn(fmt.Sprint(v...)) }
