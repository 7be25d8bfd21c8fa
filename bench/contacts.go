package main

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/bench/harness"
	"sendstream/bench/load"
	"sendstream/ingest/contacts"
	"sendstream/schemas"
)

// contacts: issue 3's targets on a workspace seeded with 1,000,000 contacts
// (COPY, not the API):
//   - POST /api/v1/contacts upserts (80% new contacts, 20% updates of seeded
//     ones) in closed loop vs the frozen single-row Postgres upsert:
//     ≥ 0.45× and ≥ 5,000/s;
//   - GET /api/v1/contacts at random pages over the whole range, with and
//     without status and listId, and GET /api/v1/contacts/search of random
//     seeded emails, each in open loop at 500 requests/s: p99 ≤ 20 ms.
const (
	seedContacts = 1_000_000
	seedPageSize = 50
)

func init() {
	var listID string
	auth := func(s *harness.System) [][2]string {
		return [][2]string{{"Authorization", "Bearer " + s.APIKey}}
	}
	page := func(query string, rows int) func(s *harness.System) *load.Request {
		return func(s *harness.System) *load.Request {
			base := s.BaseURL + "/api/v1/contacts?limit=" + strconv.Itoa(seedPageSize) + query
			if query != "" && query[0] == '#' { // "#list" and "#list-active" need the list id
				base = s.BaseURL + "/api/v1/contacts?limit=" + strconv.Itoa(seedPageSize) + "&listId=" + listID
				if query == "#list-active" {
					base += "&status=ACTIVE"
				}
			}
			pages := uint64(rows / seedPageSize)
			return &load.Request{Method: "GET", URL: base, Header: auth(s),
				VaryURL: func(dst []byte, n uint64) []byte {
					dst = append(dst, base...)
					dst = append(dst, "&page="...)
					return strconv.AppendUint(dst, mix(n)%pages+1, 10)
				}}
		}
	}
	// Seeded statuses: every 10th UNSUBSCRIBED, every 50th (offset 1)
	// BOUNCED, the rest ACTIVE; every 3rd contact is on the list.
	const active = seedContacts - seedContacts/10 - seedContacts/50
	open := func(name string, req func(s *harness.System) *load.Request) harness.OpenLoop {
		return harness.OpenLoop{Name: name, Rate: 500, P99Max: 20 * time.Millisecond, Request: req, NoBaseline: true}
	}
	harness.Register(harness.Benchmark{
		Name:      "contacts",
		Doc:       "POST /api/v1/contacts upserts vs single-row Postgres upsert; contact pages and search at 500/s on 1M seeded contacts",
		Issue:     3,
		Requires:  []string{"main.go", "ingest/contacts"},
		Baselines: []string{"pg-upsert-row"},
		Setup: func(ctx context.Context, s *harness.System) error {
			id, err := seedContactsWorkspace(ctx, s)
			listID = id
			return err
		},
		Request: func(s *harness.System) *load.Request {
			run := schemas.NewID()[:8]
			return &load.Request{Method: "POST", URL: s.BaseURL + "/api/v1/contacts", Header: auth(s),
				ContentType: "application/json",
				Vary: func(dst []byte, n uint64) []byte {
					dst = append(dst, `{"email":"`...)
					if n%5 == 4 { // an update of a seeded contact
						dst = append(dst, "seed"...)
						dst = strconv.AppendUint(dst, mix(n)%seedContacts, 10)
					} else {
						dst = append(dst, "up-"...)
						dst = append(dst, run...)
						dst = append(dst, '-')
						dst = strconv.AppendUint(dst, n, 10)
					}
					dst = append(dst, `@bench.example","firstName":"Bench`...)
					dst = strconv.AppendUint(dst, n%100, 10)
					return append(dst, `","country":"DE","customFields":{"plan":"pro"}}`...)
				}}
		},
		OpenLoop: []harness.OpenLoop{
			open("page-any", page("", seedContacts)),
			open("page-status", page("&status=ACTIVE", active)),
			open("page-list", page("#list", seedContacts/3)),
			open("page-list-status", page("#list-active", seedContacts/3*active/seedContacts)),
			open("search", func(s *harness.System) *load.Request {
				base := s.BaseURL + "/api/v1/contacts/search?email=seed"
				return &load.Request{Method: "GET", URL: base + "0%40bench.example", Header: auth(s),
					VaryURL: func(dst []byte, n uint64) []byte {
						dst = append(dst, base...)
						dst = strconv.AppendUint(dst, mix(n)%seedContacts, 10)
						return append(dst, "%40bench.example"...)
					}}
			}),
		},
		Targets: harness.Targets{MinRatio: 0.45, MinOpsPerSec: 5000},
	})
}

// mix is splitmix64: spreads request numbers over pages and contacts.
func mix(n uint64) uint64 {
	n += 0x9e3779b97f4a7c15
	n = (n ^ (n >> 30)) * 0xbf58476d1ce4e5b9
	n = (n ^ (n >> 27)) * 0x94d049bb133111eb
	return n ^ (n >> 31)
}

// seedContactsWorkspace loads 1,000,000 contacts into the bench workspace
// with COPY, puts every third on a list, defines the custom field the
// upserts use, and rebuilds the counters. It first removes the contacts of
// earlier bench workspaces so the shared database does not grow per run.
// It returns the list id.
func seedContactsWorkspace(ctx context.Context, s *harness.System) (string, error) {
	start := time.Now()
	pool, err := pgxpool.New(ctx, s.Stack.PostgresURL)
	if err != nil {
		return "", fmt.Errorf("seed: connect: %w", err)
	}
	defer pool.Close()
	if err := purgeOldBenchContacts(ctx, pool, s.WorkspaceID); err != nil {
		return "", err
	}
	if err := s.Admin(ctx, nil, "custom-field", "create", "--workspace", s.WorkspaceID, "--key", "plan"); err != nil {
		return "", err
	}
	var list struct {
		ID string `json:"id"`
	}
	if err := s.Admin(ctx, &list, "list", "create", "--workspace", s.WorkspaceID, "--name", "Bench list"); err != nil {
		return "", err
	}
	ws := s.WorkspaceID
	base := time.Now().Add(-seedContacts * time.Second).UTC()
	i := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == seedContacts {
			return nil, nil
		}
		status := contacts.StatusActive
		switch {
		case i%10 == 0:
			status = contacts.StatusUnsubscribed
		case i%50 == 1:
			status = contacts.StatusBounced
		}
		at := base.Add(time.Duration(i) * time.Second)
		row := []any{schemas.NewID(), ws, int64(i + 1), "seed" + strconv.Itoa(i) + "@bench.example", "Seed",
			status, "import", `{"plan":"free"}`, at, at}
		i++
		return row, nil
	})
	n, err := pool.CopyFrom(ctx, pgx.Identifier{"contacts"},
		[]string{"id", "workspace_id", "seq", "email", "first_name", "status", "source", "custom_fields", "created_at", "updated_at"}, src)
	if err != nil {
		return "", fmt.Errorf("seed: copy contacts: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO memberships (list_id, contact_id, workspace_id, contact_seq, contact_status, status)
		SELECT $1, id, workspace_id, seq, status, 'ACTIVE' FROM contacts WHERE workspace_id = $2 AND seq % 3 = 0`, list.ID, ws); err != nil {
		return "", fmt.Errorf("seed: memberships: %w", err)
	}
	if err := settleContactSeed(ctx, pool, ws, "contacts", "memberships"); err != nil {
		return "", err
	}
	log.Printf("contacts: seeded %d contacts (COPY) and %d memberships in %s", n, seedContacts/3, time.Since(start).Round(time.Second))
	return list.ID, nil
}

// settleContactSeed rebuilds workspace ws's contact counters after a COPY
// seed (COPY bypasses the store that keeps them), then settles tables
// (settleSeed).
func settleContactSeed(ctx context.Context, pool *pgxpool.Pool, ws string, tables ...string) error {
	store := contacts.NewStore(pool)
	defer store.Close()
	if err := store.RebuildCounters(ctx, ws); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	return settleSeed(ctx, pool, tables...)
}

// settleSeed vacuums and analyzes the seeded tables, then checkpoints, so
// the seed's aftermath (autovacuum of a million new rows, a checkpoint
// flushing them while commits wait on the disk) does not land in the
// measured runs. The checkpoint needs a superuser, as on the local stack;
// elsewhere it is skipped.
func settleSeed(ctx context.Context, pool *pgxpool.Pool, tables ...string) error {
	for _, t := range tables {
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+pgx.Identifier{t}.Sanitize()); err != nil {
			return fmt.Errorf("seed: vacuum %s: %w", t, err)
		}
	}
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		log.Printf("seed: checkpoint skipped: %v", err)
	}
	return nil
}

// purgeOldBenchContacts deletes the contacts data of earlier bench
// workspaces (named "bench"), keeping the current one.
func purgeOldBenchContacts(ctx context.Context, pool *pgxpool.Pool, current string) error {
	const old = "(SELECT id FROM workspaces WHERE name = 'bench' AND id <> $1)"
	return execWithoutTriggers(ctx, pool, "purge old bench contacts", current,
		"DELETE FROM memberships WHERE workspace_id IN "+old,
		"DELETE FROM list_buckets WHERE list_id IN (SELECT id FROM lists WHERE workspace_id IN "+old+")",
		"DELETE FROM lists WHERE workspace_id IN "+old,
		"DELETE FROM contact_buckets WHERE workspace_id IN "+old,
		"DELETE FROM contacts WHERE workspace_id IN "+old,
	)
}

// execWithoutTriggers runs stmts, each with the one argument arg, in one
// transaction with triggers off (session_replication_role = replica): the
// counter triggers only matter for the workspaces being emptied.
func execWithoutTriggers(ctx context.Context, pool *pgxpool.Pool, what, arg string, stmts ...string) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("seed: %s: %w", what, err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("seed: %s: %w", what, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
	if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
		return fmt.Errorf("seed: %s: %w", what, err)
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q, arg); err != nil {
			return fmt.Errorf("seed: %s: %w", what, err)
		}
	}
	return tx.Commit(ctx)
}
