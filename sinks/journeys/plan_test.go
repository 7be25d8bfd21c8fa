package journeys

import (
	"context"
	"strings"
	"testing"
	"time"

	"sendstream/deploy/stack"
)

// TestAdvanceAllPlanIsLinearInTheBatch: the engine's shared statement is a
// prepared statement, which Postgres soon plans generically, guessing 10
// rows for the arrays and 1 for each CTE. Planned so over tables the size
// of a busy engine's (copies in a scratch schema, analyzed, rolled back),
// no step may compare every row of one CTE with every row of another (a
// nested loop with a join filter between two CTE scans): that made the
// statement quadratic in the batch (160 ms for 247 steps), exactly when the
// engine falls behind and batches grow.
func TestAdvanceAllPlanIsLinearInTheBatch(t *testing.T) {
	pg := stack.PG(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pg.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// A prepared statement outlives its transaction: deallocated on its
	// connection after the rollback.
	defer func() { _, _ = conn.Exec(context.Background(), "DEALLOCATE plan_advance_stmt") }()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	for _, s := range []string{
		"CREATE SCHEMA plan_advance",
		"CREATE TABLE plan_advance.journey_executions (LIKE public.journey_executions INCLUDING ALL)",
		"CREATE TABLE plan_advance.journey_step_runs (LIKE public.journey_step_runs INCLUDING ALL)",
		"CREATE TABLE plan_advance.journey_entries (LIKE public.journey_entries INCLUDING ALL)",
		"CREATE TABLE plan_advance.journeys (LIKE public.journeys INCLUDING ALL)",
		`INSERT INTO plan_advance.journeys (id, workspace_id, name, status, trigger_type, reentry, current_version, created_at, updated_at)
		 SELECT 'j' || g, 'w', 'j' || g, 'active', 'api_event', 'once', 1, now(), now() FROM generate_series(1, 20) g`,
		`INSERT INTO plan_advance.journey_executions (id, workspace_id, journey_id, version, contact_id, state, position, trigger_type, started_at, updated_at, next_wake_at)
		 SELECT 'e' || g, 'w', 'j' || (g % 20 + 1), 1, 'c' || g, 'active', '0', 'api_event', now(), now(), now() FROM generate_series(1, 50000) g`,
		`INSERT INTO plan_advance.journey_entries (journey_id, contact_id, entries, running, first_entered_at, last_entered_at)
		 SELECT 'j' || (g % 20 + 1), 'c' || g, 1, 1, now(), now() FROM generate_series(1, 50000) g`,
		`INSERT INTO plan_advance.journey_step_runs (execution_id, address, step_type, outcome, cause_id, done_at)
		 SELECT 'e' || g, '0', 'delay', 'done', 'x' || g, now() FROM generate_series(1, 50000) g`,
		"ANALYZE plan_advance.journey_executions, plan_advance.journey_step_runs, plan_advance.journey_entries, plan_advance.journeys",
		"SET LOCAL search_path = plan_advance, public",
		"SET LOCAL plan_cache_mode = force_generic_plan",
		"PREPARE plan_advance_stmt AS " + sqlEngineAdvance,
	} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	rows, err := tx.Query(ctx, `EXPLAIN EXECUTE plan_advance_stmt('{e1,e2}', '{0,0}', '{t,f}', '{delay,send_email}', '{done,sent}',
		'{"",m}', '{"",""}', '{"",completed}', '{c1,c2}', '{1,""}', '{2026-01-01T00:00:00Z,2026-01-01T00:00:00Z}')`)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if strings.Contains(plan, "Join Filter") {
		t.Errorf("the generic plan compares row pairs in a nested loop:\n%s", plan)
	}
	if !strings.Contains(plan, "journey_executions_pkey") {
		t.Errorf("the generic plan does not find executions by primary key:\n%s", plan)
	}
}
