package mailsink

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Run runs the development mail sink until ctx ends (main cancels it on
// SIGINT or SIGTERM): `sendstream mailsink --smtp 127.0.0.1:1025 --http
// 127.0.0.1:1080 --dir .run/mail` passes its arguments here. It accepts
// every message (any AUTH or none, no TLS), keeps the newest --max-messages
// as .eml files under --dir, and serves a web inbox. One line per message
// goes to stderr as JSON.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mailsink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	smtpAddr := fs.String("smtp", DefaultSMTPAddr, "SMTP listen address (loopback only)")
	httpAddr := fs.String("http", DefaultHTTPAddr, "web inbox listen address (loopback only)")
	dir := fs.String("dir", DefaultDir, "directory for the .eml files and their index")
	maxMessages := fs.Int("max-messages", DefaultMaxMessages, "messages kept; the oldest beyond this are deleted")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mailsink: unexpected arguments %q", fs.Args())
	}
	sink, err := Open(Config{
		SMTPAddr:    *smtpAddr,
		HTTPAddr:    *httpAddr,
		Dir:         *dir,
		MaxMessages: *maxMessages,
		Logger:      slog.New(slog.NewJSONHandler(stderr, nil)),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "mailsink: SMTP on %s, inbox at %s\n", sink.SMTPAddr(), sink.InboxURL())
	return sink.Serve(ctx)
}
