package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
	chsink "sendstream/sinks/clickhouse"
	pgsink "sendstream/sinks/postgres"
)

// adminCommand is one `sendstream admin <noun> <verb>` (or `admin <noun>`).
// run parses its flags and returns the value printed as one JSON object.
type adminCommand struct {
	usage string
	run   func(ctx context.Context, env *adminEnv, fs *flag.FlagSet, args []string) (any, error)
}

// adminCommands maps "noun verb" (or "noun") to its command. Feature files
// (admin_<feature>.go) add theirs from init().
var adminCommands = map[string]adminCommand{
	"workspace create": {"--name N [--plan free|pro|enterprise] [--contact-limit N] [--rate-multiplier N]", adminWorkspaceCreate},
	"workspace suspend": {"--workspace W", func(ctx context.Context, e *adminEnv, fs *flag.FlagSet, a []string) (any, error) {
		return adminSetSuspended(ctx, e, fs, a, true)
	}},
	"workspace resume": {"--workspace W", func(ctx context.Context, e *adminEnv, fs *flag.FlagSet, a []string) (any, error) {
		return adminSetSuspended(ctx, e, fs, a, false)
	}},
	"apikey create":         {"--workspace W [--scopes a,b] [--expires-at RFC3339] [--name N]", adminAPIKeyCreate},
	"apikey delete":         {"--workspace W --id K", adminAPIKeyDelete},
	"member create":         {"--workspace W --email E --password P --role owner|admin|member", adminMemberCreate},
	"tracking-token create": {"--workspace W [--domains a.com,b.com]", adminTrackingTokenCreate},
	"requests":              {"--workspace W [--since RFC3339] [--limit N]", adminRequests},
}

// adminEnv opens the stores a command needs, once, from the local stack's
// settings (deploy/stack.Load: SENDSTREAM_* variables win over .run/stack.env).
type adminEnv struct {
	once   sync.Once
	st     stack.Env
	stErr  error
	pg     *pgxpool.Pool
	ch     driver.Conn
	stderr io.Writer
}

func (e *adminEnv) load() (stack.Env, error) {
	e.once.Do(func() { e.st, e.stErr = stack.Load() })
	return e.st, e.stErr
}

// PG returns the Postgres pool (migrations applied).
func (e *adminEnv) PG(ctx context.Context) (*pgxpool.Pool, error) {
	if e.pg != nil {
		return e.pg, nil
	}
	st, err := e.load()
	if st.PostgresURL == "" {
		return nil, fmt.Errorf("no Postgres: set SENDSTREAM_POSTGRES_URL or start the local stack (make run): %v", err)
	}
	pg, err := pgsink.Open(ctx, st.PostgresURL)
	if err != nil {
		return nil, err
	}
	if err := pgsink.Migrate(ctx, pg); err != nil {
		pg.Close()
		return nil, err
	}
	e.pg = pg
	return pg, nil
}

// CH returns the ClickHouse connection.
func (e *adminEnv) CH(ctx context.Context) (driver.Conn, error) {
	if e.ch != nil {
		return e.ch, nil
	}
	st, err := e.load()
	if st.ClickHouseAddr == "" {
		return nil, fmt.Errorf("no ClickHouse: set SENDSTREAM_CLICKHOUSE_ADDR or start the local stack (make run): %v", err)
	}
	db := st.ClickHouseDB
	if db == "" {
		db = "sendstream"
	}
	ch, err := chsink.Open(ctx, st.ClickHouseAddr, db)
	if err != nil {
		return nil, err
	}
	e.ch = ch
	return ch, nil
}

func (e *adminEnv) close() {
	if e.pg != nil {
		e.pg.Close()
	}
	if e.ch != nil {
		_ = e.ch.Close()
	}
}

// runAdmin runs `sendstream admin <noun> [verb] [flags]`: it prints one JSON
// object on stdout, or returns an error (main prints it to stderr and exits
// non-zero).
func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	name, cmd, rest, ok := lookupAdmin(args)
	if !ok {
		adminUsage(stderr)
		if len(args) == 0 {
			return errors.New("admin: missing command")
		}
		return fmt.Errorf("admin: unknown command %q", strings.Join(args[:min(2, len(args))], " "))
	}
	fs := flag.NewFlagSet("admin "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, "usage: sendstream admin %s %s\n", name, cmd.usage) }
	env := &adminEnv{stderr: stderr}
	defer env.close()
	out, err := cmd.run(ctx, env, fs, rest)
	if err != nil {
		return fmt.Errorf("admin %s: %w", name, err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

func lookupAdmin(args []string) (string, adminCommand, []string, bool) {
	if len(args) >= 2 {
		if c, ok := adminCommands[args[0]+" "+args[1]]; ok {
			return args[0] + " " + args[1], c, args[2:], true
		}
	}
	if len(args) >= 1 {
		if c, ok := adminCommands[args[0]]; ok {
			return args[0], c, args[1:], true
		}
	}
	return "", adminCommand{}, nil, false
}

func adminUsage(w io.Writer) {
	names := make([]string, 0, len(adminCommands))
	for n := range adminCommands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: sendstream admin <command> [flags]; output is one JSON object")
	for _, n := range names {
		fmt.Fprintf(w, "  %s %s\n", n, adminCommands[n].usage)
	}
}

// parseFlags parses args and fails when a required flag is empty or
// positional arguments are left over.
func parseFlags(fs *flag.FlagSet, args []string, required ...string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, r := range required {
		if f := fs.Lookup(r); f == nil || f.Value.String() == "" {
			return fmt.Errorf("--%s is required", r)
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func adminStore(ctx context.Context, env *adminEnv) (*auth.Store, error) {
	pg, err := env.PG(ctx)
	if err != nil {
		return nil, err
	}
	return auth.NewStore(pg), nil
}

// adminWorkspaceStore is adminStore for a command on workspace ws: it fails
// with a clear message when the workspace does not exist.
func adminWorkspaceStore(ctx context.Context, env *adminEnv, ws string) (*auth.Store, error) {
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

func adminWorkspaceCreate(ctx context.Context, env *adminEnv, fs *flag.FlagSet, args []string) (any, error) {
	name := fs.String("name", "", "workspace name")
	plan := fs.String("plan", "free", "free, pro or enterprise")
	limit := fs.String("contact-limit", "", "contacts allowed (0 = unlimited; default by plan: free 1000, pro 50000, enterprise unlimited)")
	mult := fs.Int64("rate-multiplier", 0, "multiplies every per-minute rate limit (default by plan: 1; enterprise 100)")
	if err := parseFlags(fs, args, "name"); err != nil {
		return nil, err
	}
	w := auth.NewWorkspace{Name: *name, Plan: *plan, RateMultiplier: *mult}
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

func adminSetSuspended(ctx context.Context, env *adminEnv, fs *flag.FlagSet, args []string, suspended bool) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	if err := parseFlags(fs, args, "workspace"); err != nil {
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

func adminAPIKeyCreate(ctx context.Context, env *adminEnv, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	scopes := fs.String("scopes", "", "comma-separated scopes; none means full access ("+strings.Join(auth.Scopes, ", ")+")")
	expires := fs.String("expires-at", "", "RFC 3339 expiry; none means never")
	name := fs.String("name", "", "a label for the key")
	if err := parseFlags(fs, args, "workspace"); err != nil {
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
	sc := splitList(*scopes)
	for _, s := range sc {
		if !auth.ValidScope(s) {
			return nil, fmt.Errorf("unknown scope %q (valid: %s)", s, strings.Join(auth.Scopes, ", "))
		}
	}
	s, err := adminWorkspaceStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	id, key, err := s.CreateAPIKey(ctx, *ws, *name, sc, exp)
	if err != nil {
		return nil, err
	}
	return map[string]string{"id": id, "key": key}, nil
}

func adminAPIKeyDelete(ctx context.Context, env *adminEnv, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	id := fs.String("id", "", "API key id")
	if err := parseFlags(fs, args, "workspace", "id"); err != nil {
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

func adminMemberCreate(ctx context.Context, env *adminEnv, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	email := fs.String("email", "", "member email")
	password := fs.String("password", "", "password (at least 8 characters; only a hash is stored)")
	role := fs.String("role", "", "owner, admin or member")
	if err := parseFlags(fs, args, "workspace", "email", "password", "role"); err != nil {
		return nil, err
	}
	s, err := adminWorkspaceStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	id, err := s.CreateMember(ctx, *ws, *email, *password, *role)
	if err != nil {
		return nil, err
	}
	return map[string]string{"id": id}, nil
}

func adminTrackingTokenCreate(ctx context.Context, env *adminEnv, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	domains := fs.String("domains", "", "comma-separated allowed domains; none allows every origin")
	if err := parseFlags(fs, args, "workspace"); err != nil {
		return nil, err
	}
	s, err := adminWorkspaceStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	id, tok, err := s.CreateTrackingToken(ctx, *ws, splitList(*domains))
	if err != nil {
		return nil, err
	}
	return map[string]string{"id": id, "token": tok}, nil
}

func adminRequests(ctx context.Context, env *adminEnv, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	since := fs.String("since", "", "RFC 3339; default 24 hours ago")
	limit := fs.Int("limit", 50, "at most this many, newest first (1 to 1000)")
	if err := parseFlags(fs, args, "workspace"); err != nil {
		return nil, err
	}
	from := time.Now().Add(-24 * time.Hour)
	if *since != "" {
		t, err := time.Parse(time.RFC3339, *since)
		if err != nil {
			return nil, fmt.Errorf("--since %q: want RFC 3339", *since)
		}
		from = t
	}
	if *limit < 1 || *limit > 1000 {
		return nil, errors.New("--limit must be from 1 to 1000")
	}
	ch, err := env.CH(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := chsink.QueryRequests(ctx, ch, *ws, from, *limit)
	if err != nil {
		return nil, err
	}
	return map[string]any{"requests": rows}, nil
}
