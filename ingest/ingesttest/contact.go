package ingesttest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/ingest/auth"
	"sendstream/ingest/contacts"
)

// WorkspaceWithContact creates a pro workspace named name in pg, without a
// server, and one contact of it with email; it returns both ids. A
// failure fails t.
func WorkspaceWithContact(ctx context.Context, t testing.TB, pg *pgxpool.Pool, name, email string) (workspaceID, contactID string) {
	t.Helper()
	ws, _, err := auth.NewStore(pg).CreateWorkspace(ctx, auth.NewWorkspace{Name: name, Plan: "pro"})
	if err != nil {
		t.Fatalf("ingesttest: %v", err)
	}
	cs := contacts.NewStore(pg)
	defer cs.Close()
	up, err := cs.Upsert(ctx, ws, contacts.UpsertInput{Email: email})
	if err != nil {
		t.Fatalf("ingesttest: %v", err)
	}
	return ws, up.Contact.ID
}
