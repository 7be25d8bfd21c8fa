package auth

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Channel is the Postgres NOTIFY channel on which credential changes are
// announced (sql/notify.sql, sql/listen.sql and the triggers of
// schemas/postgres/0075_credential_invalidation.sql name it). Its payloads
// are Change.String: ids only, never a credential or its hash.
//
// Every change to api_keys, tracking_tokens and workspaces that alters an
// Identity is announced by those triggers, whatever code (or person)
// writes it. A credential kind added later announces its changes either
// with the same trigger function on its table (sendstream_auth_notify,
// argument 'credential' or 'workspace', announcing the row's id) or by
// calling Invalidate in the transaction that makes the change.
const Channel = "sendstream_auth"

var (
	//go:embed sql/notify.sql
	sqlNotify string
	//go:embed sql/listen.sql
	sqlListen string
)

// ChangeKind says which cached credentials a Change concerns.
type ChangeKind uint8

// Kinds of Change.
const (
	// ChangeCredential: the credential whose Identity.KeyID is ID was
	// deleted, revoked or changed (scopes, expiry, secret).
	ChangeCredential ChangeKind = iota + 1
	// ChangeWorkspace: the workspace ID changed (suspended, resumed, plan,
	// limits); every credential of it is looked up again.
	ChangeWorkspace
	// ChangeAll: anything may have changed (a Listener reconnected and may
	// have missed notifications); every cached answer is dropped.
	ChangeAll
)

// Change names what changed. Payloads on Channel are its String form:
// "credential:<id>" or "workspace:<id>".
type Change struct {
	Kind ChangeKind
	ID   string
}

// CredentialChanged is the Change for one credential, by the id that
// resolves into Identity.KeyID (an API key's or tracking token's id).
func CredentialChanged(id string) Change { return Change{Kind: ChangeCredential, ID: id} }

// WorkspaceChanged is the Change for every credential of a workspace.
func WorkspaceChanged(id string) Change { return Change{Kind: ChangeWorkspace, ID: id} }

// String is the notification payload of c.
func (c Change) String() string {
	switch c.Kind {
	case ChangeCredential:
		return "credential:" + c.ID
	case ChangeWorkspace:
		return "workspace:" + c.ID
	}
	return "all"
}

// parseChange reads a payload; anything it does not know is ChangeAll,
// the safe reading.
func parseChange(payload string) (Change, bool) {
	kind, id, _ := strings.Cut(payload, ":")
	switch {
	case kind == "credential" && id != "":
		return CredentialChanged(id), true
	case kind == "workspace" && id != "":
		return WorkspaceChanged(id), true
	}
	return Change{Kind: ChangeAll}, payload == "all"
}

// Execer runs a statement: a pgx.Tx (the usual case), a *pgxpool.Pool or
// a *pgx.Conn.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Invalidate announces changes to every process's credential cache, for
// changes no trigger announces (see Channel). Call it with the transaction
// that makes the change: Postgres delivers the notification when, and only
// if, that transaction commits, and every Listener evicts what it names
// (usually within milliseconds). Called with a pool, the notification goes
// out at once, so do that only after the change committed. Credential kinds
// added with RegisterKind (OAuth access tokens: CredentialChanged with the
// id their Resolve puts in Identity.KeyID) call it when they revoke one.
func Invalidate(ctx context.Context, db Execer, changes ...Change) error {
	for _, c := range changes {
		if c.Kind != ChangeAll && c.ID == "" {
			return fmt.Errorf("invalidate credentials: change %q names no id", c.String())
		}
		if _, err := db.Exec(ctx, sqlNotify, c.String()); err != nil {
			return fmt.Errorf("invalidate credentials (%s): %w", c.String(), err)
		}
	}
	return nil
}

// Evict drops the cached answers a Change concerns: the credential's,
// every credential's of the workspace, or everything. A lookup in flight
// when Evict is called returns its answer but does not cache it. Safe for
// concurrent use; a Listener calls it.
func (c *Cache) Evict(ch Change) {
	c.epoch.Add(1)
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		switch ch.Kind {
		case ChangeCredential:
			for h, e := range sh.pos {
				if e.id.KeyID == ch.ID {
					delete(sh.pos, h)
				}
			}
		case ChangeWorkspace:
			for h, e := range sh.pos {
				if e.id.Workspace == ch.ID {
					delete(sh.pos, h)
				}
			}
		default:
			clear(sh.pos)
			clear(sh.neg)
		}
		sh.mu.Unlock()
	}
}
