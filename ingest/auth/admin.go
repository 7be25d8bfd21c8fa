package auth

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/admincli"
)

// AdminCommands are the operator's commands on workspaces and their
// credentials (DESIGN.md): workspace create|suspend|resume, apikey
// create|delete and tracking-token create (member create lives in
// ingest/members). features.go lists them.
func AdminCommands() []admincli.Command {
	return []admincli.Command{
		{Name: "workspace create", Usage: "--name N [--plan free|pro|enterprise] [--contact-limit N] [--rate-multiplier N]", Run: adminWorkspaceCreate},
		{Name: "workspace suspend", Usage: "--workspace W", Run: func(ctx context.Context, e *admincli.Env, fs *flag.FlagSet, a []string) (any, error) {
			return adminSetSuspended(ctx, e, fs, a, true)
		}},
		{Name: "workspace resume", Usage: "--workspace W", Run: func(ctx context.Context, e *admincli.Env, fs *flag.FlagSet, a []string) (any, error) {
			return adminSetSuspended(ctx, e, fs, a, false)
		}},
		{Name: "apikey create", Usage: "--workspace W [--scopes a,b] [--expires-at RFC3339] [--name N]", Run: adminAPIKeyCreate},
		{Name: "apikey delete", Usage: "--workspace W --id K", Run: adminAPIKeyDelete},
		{Name: "tracking-token create", Usage: "--workspace W [--domains a.com,b.com]", Run: adminTrackingTokenCreate},
	}
}

// RequireWorkspace returns the store on env's Postgres after checking that
// workspace ws exists; the error names ws when it does not. Every admin
// command on one workspace calls it before it changes anything, so a typo
// in --workspace never creates rows nobody can reach.
func RequireWorkspace(ctx context.Context, env *admincli.Env, ws string) (*Store, error) {
	s, err := adminStore(ctx, env)
	if err != nil {
		return nil, err
	}
	ok, err := s.WorkspaceExists(ctx, ws)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("workspace %s does not exist", ws)
	}
	return s, nil
}

// WorkspacePG checks that workspace ws exists (RequireWorkspace) and
// returns the admin command's Postgres pool: what every feature's admin
// commands start with.
func WorkspacePG(ctx context.Context, env *admincli.Env, ws string) (*pgxpool.Pool, error) {
	if _, err := RequireWorkspace(ctx, env, ws); err != nil {
		return nil, err
	}
	return env.PG(ctx)
}

func adminStore(ctx context.Context, env *admincli.Env) (*Store, error) {
	pg, err := env.PG(ctx)
	if err != nil {
		return nil, err
	}
	return NewStore(pg), nil
}

// adminWorkspaceCreate creates a workspace and its first API key →
// {"workspaceId","apiKey"}.
func adminWorkspaceCreate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	name := fs.String("name", "", "workspace name")
	plan := fs.String("plan", "free", "free, pro or enterprise")
	limit := fs.String("contact-limit", "", "contacts allowed (0 = unlimited; default by plan: free 1000, pro 50000, enterprise unlimited)")
	mult := fs.Int64("rate-multiplier", 0, "multiplies every per-minute rate limit (default by plan: 1; enterprise 100)")
	if err := admincli.ParseFlags(fs, args, "name"); err != nil {
		return nil, err
	}
	w := NewWorkspace{Name: *name, Plan: *plan, RateMultiplier: *mult}
	if *mult < 0 {
		return nil, errors.New("--rate-multiplier must be at least 1")
	}
	if *limit != "" {
		n, err := strconv.ParseInt(*limit, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--contact-limit %q: want 0 (unlimited) or a positive number", *limit)
		}
		w.ContactLimit = &n
	}
	s, err := adminStore(ctx, env)
	if err != nil {
		return nil, err
	}
	id, key, err := s.CreateWorkspace(ctx, w)
	if err != nil {
		return nil, err
	}
	return map[string]string{"workspaceId": id, "apiKey": key}, nil
}

// adminSetSuspended suspends or resumes a workspace →
// {"workspaceId","suspended"}.
func adminSetSuspended(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string, suspended bool) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	if err := admincli.ParseFlags(fs, args, "workspace"); err != nil {
		return nil, err
	}
	s, err := adminStore(ctx, env)
	if err != nil {
		return nil, err
	}
	if err := s.SetSuspended(ctx, *ws, suspended); err != nil {
		return nil, err
	}
	return map[string]any{"workspaceId": *ws, "suspended": suspended}, nil
}

// adminAPIKeyCreate creates an API key → {"id","key"}.
func adminAPIKeyCreate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	scopes := fs.String("scopes", "", "comma-separated scopes; none means full access ("+strings.Join(Scopes, ", ")+")")
	expires := fs.String("expires-at", "", "RFC 3339 expiry; none means never")
	name := fs.String("name", "", "a label for the key")
	if err := admincli.ParseFlags(fs, args, "workspace"); err != nil {
		return nil, err
	}
	var exp *time.Time
	if *expires != "" {
		t, err := time.Parse(time.RFC3339, *expires)
		if err != nil {
			return nil, fmt.Errorf("--expires-at %q: want RFC 3339, e.g. 2030-01-02T15:04:05Z", *expires)
		}
		exp = &t
	}
	sc := admincli.SplitList(*scopes)
	for _, s := range sc {
		if !ValidScope(s) {
			return nil, fmt.Errorf("unknown scope %q (valid: %s)", s, strings.Join(Scopes, ", "))
		}
	}
	s, err := RequireWorkspace(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	id, key, err := s.CreateAPIKey(ctx, *ws, *name, sc, exp)
	if err != nil {
		return nil, err
	}
	return map[string]string{"id": id, "key": key}, nil
}

// adminAPIKeyDelete deletes an API key → {"deleted":true}.
func adminAPIKeyDelete(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	id := fs.String("id", "", "API key id")
	if err := admincli.ParseFlags(fs, args, "workspace", "id"); err != nil {
		return nil, err
	}
	s, err := adminStore(ctx, env)
	if err != nil {
		return nil, err
	}
	if err := s.DeleteAPIKey(ctx, *ws, *id); err != nil {
		return nil, err
	}
	return map[string]bool{"deleted": true}, nil
}

// adminTrackingTokenCreate creates a website tracking token →
// {"id","token"}.
func adminTrackingTokenCreate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	domains := fs.String("domains", "", "comma-separated allowed domains; none allows every origin")
	if err := admincli.ParseFlags(fs, args, "workspace"); err != nil {
		return nil, err
	}
	s, err := RequireWorkspace(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	id, tok, err := s.CreateTrackingToken(ctx, *ws, admincli.SplitList(*domains))
	if err != nil {
		return nil, err
	}
	return map[string]string{"id": id, "token": tok}, nil
}
