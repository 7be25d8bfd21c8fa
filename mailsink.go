package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"sendstream/deploy/mailsink"
)

// runMailsink runs the development mail sink until SIGINT or SIGTERM:
// `sendstream mailsink --smtp 127.0.0.1:1025 --http 127.0.0.1:1080 --dir .run/mail`.
// It accepts every message (any AUTH or none, no TLS), keeps the newest
// --max-messages as .eml files under --dir, and serves a web inbox; see
// package deploy/mailsink. One line per message goes to stderr as JSON.
func runMailsink(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mailsink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	smtpAddr := fs.String("smtp", mailsink.DefaultSMTPAddr, "SMTP listen address (loopback only)")
	httpAddr := fs.String("http", mailsink.DefaultHTTPAddr, "web inbox listen address (loopback only)")
	dir := fs.String("dir", mailsink.DefaultDir, "directory for the .eml files and their index")
	maxMessages := fs.Int("max-messages", mailsink.DefaultMaxMessages, "messages kept; the oldest beyond this are deleted")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mailsink: unexpected arguments %q", fs.Args())
	}
	sink, err := mailsink.Open(mailsink.Config{
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
