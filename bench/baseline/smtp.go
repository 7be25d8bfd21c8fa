package baseline

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/emersion/go-smtp"
)

// FROZEN: the SMTP baseline: an emersion/go-smtp server in this process that
// discards what it receives, and one client connection over loopback reused
// for every 4 KB message (MAIL, RCPT, DATA).

func init() {
	register(&Baseline{
		Name:    "smtp-sink",
		Doc:     "SMTP to an in-process go-smtp sink over loopback, 4 KB messages, one reused connection",
		Unit:    "messages",
		Workers: 1,
		Setup: func(ctx context.Context, env Env) (func(context.Context, int) (Op, error), func(), error) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, nil, fmt.Errorf("listen: %w", err)
			}
			srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return discard{}, nil }))
			srv.Domain = "sink.bench.local"
			srv.AllowInsecureAuth = true
			go func() { _ = srv.Serve(ln) }()
			msg := message4K()
			var clients []*smtp.Client
			newOp := func(_ context.Context, w int) (Op, error) {
				c, err := smtp.Dial(ln.Addr().String())
				if err != nil {
					return nil, fmt.Errorf("dial sink: %w", err)
				}
				if err := c.Hello("bench.example.com"); err != nil {
					return nil, fmt.Errorf("hello: %w", err)
				}
				clients = append(clients, c)
				return func(context.Context) (int, error) {
					if err := c.Mail("bench@bench.example.com", nil); err != nil {
						return 0, fmt.Errorf("mail: %w", err)
					}
					if err := c.Rcpt("ada@example.com", nil); err != nil {
						return 0, fmt.Errorf("rcpt: %w", err)
					}
					wc, err := c.Data()
					if err != nil {
						return 0, fmt.Errorf("data: %w", err)
					}
					if _, err := wc.Write(msg); err != nil {
						return 0, fmt.Errorf("write: %w", err)
					}
					if err := wc.Close(); err != nil {
						return 0, fmt.Errorf("end data: %w", err)
					}
					return 1, nil
				}, nil
			}
			cleanup := func() {
				for _, c := range clients {
					_ = c.Quit()
				}
				_ = srv.Close()
			}
			return newOp, cleanup, nil
		},
	})
}

// discard is a sink session that accepts everything and keeps nothing.
type discard struct{}

func (discard) Reset()                               {}
func (discard) Logout() error                        { return nil }
func (discard) Mail(string, *smtp.MailOptions) error { return nil }
func (discard) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (discard) Data(r io.Reader) error               { _, err := io.Copy(io.Discard, r); return err }
