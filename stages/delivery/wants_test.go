package delivery

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"sendstream/deploy/stack"
	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
	"sendstream/sinks/email/smtptest"
)

// TestWebhookEnvelopesOnlyWhenWanted: in a workspace without webhook
// targets a sent and a failed message return their status envelope only
// (the message log keeps every status); a REST hook for
// TRANSACTIONAL_SENT adds that envelope to sent messages, and an endpoint
// listing TRANSACTIONAL_FAILED adds that one to failed messages, each
// within the lookup's cache time (webhook.TargetTTL).
func TestWebhookEnvelopesOnlyWhenWanted(t *testing.T) {
	pg := stack.PG(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, _ := ingesttest.WorkspaceWithContact(ctx, t, pg, "delivery wants "+schemas.NewID()[20:], "ann@example.test")
	server := smtptest.Start(t, smtptest.Options{Rcpt: func(to string) error {
		if strings.HasPrefix(to, "nouser@") {
			return &gosmtp.SMTPError{Code: 550, EnhancedCode: gosmtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
		}
		return nil
	}})
	s := smtpStage(ctx, t, pg, server.Addr)
	handle := func(to string) []string {
		t.Helper()
		outs, err := s.Handle(ctx, sendEnvelope(t, ws, to, "Hi"))
		if err != nil {
			t.Fatal(err)
		}
		return ingesttest.Types(outs)
	}
	st, sent, failed := schemas.TypeTransactionalStatus, schemas.TypeWebhookTransactionalSent, schemas.TypeWebhookTransactionalFailed
	// expect sends to `to` until the outputs are want.
	expect := func(what, to string, before, want []string) {
		t.Helper()
		ingesttest.AwaitOutputs(t, what, func() []string { return handle(to) }, before, want)
	}
	if got := handle("ann@example.test"); !slices.Equal(got, []string{st}) {
		t.Fatalf("no targets, sent: outputs %v, want the status only", got)
	}
	if got := handle("nouser@example.test"); !slices.Equal(got, []string{st}) {
		t.Fatalf("no targets, failed: outputs %v, want the status only", got)
	}
	ingesttest.Subscribe(t, pg, ws, "TRANSACTIONAL_SENT", "https://hooks.example.com/in")
	expect("a REST hook for TRANSACTIONAL_SENT", "ann@example.test", []string{st}, []string{st, sent})
	if got := handle("nouser@example.test"); !slices.Equal(got, []string{st}) {
		t.Fatalf("a hook for TRANSACTIONAL_SENT only, failed: outputs %v, want the status only", got)
	}
	ingesttest.Endpoint(t, pg, ws, "TRANSACTIONAL_FAILED")
	expect("an endpoint for TRANSACTIONAL_FAILED", "nouser@example.test", []string{st}, []string{st, failed})
}
