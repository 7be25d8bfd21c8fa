package journeys

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"sendstream/deploy/stack"
)

// Fills of the plan tests' copies: 20 active journeys, and one recorded
// step (a delay, run by envelope x<g>) of each of executions e1…e50000.
const (
	fillJourneys = `INSERT INTO journeys (id, workspace_id, name, status, trigger_type, reentry, current_version, created_at, updated_at)
		SELECT 'j' || g, 'w', 'j' || g, 'active', 'api_event', 'once', 1, now(), now() FROM generate_series(1, 20) g`
	fillStepRuns = `INSERT INTO journey_step_runs (execution_id, address, step_type, outcome, cause_id, done_at)
		SELECT 'e' || g, '0', 'delay', 'done', 'x' || g, now() FROM generate_series(1, 50000) g`
)

// TestAdvanceAllPlanIsLinearInTheBatch: the engine's shared statement is a
// prepared statement, which Postgres soon plans generically, guessing 10
// rows for the arrays and 1 for each CTE. Planned so over tables the size
// of a busy engine's (stack.GenericPlanWith: analyzed copies, rolled back),
// no step may compare every row of one CTE with every row of another (a
// nested loop with a join filter between two CTE scans): that made the
// statement quadratic in the batch (160 ms for 247 steps), exactly when the
// engine falls behind and batches grow.
func TestAdvanceAllPlanIsLinearInTheBatch(t *testing.T) {
	setup := stack.PlanSetup{
		Tables: []string{"journey_executions", "journey_step_runs", "journey_entries", "journeys"},
		Fill: []string{
			fillJourneys,
			`INSERT INTO journey_executions (id, workspace_id, journey_id, version, contact_id, state, position, trigger_type, started_at, updated_at, next_wake_at)
			 SELECT 'e' || g, 'w', 'j' || (g % 20 + 1), 1, 'c' || g, 'active', '0', 'api_event', now(), now(), now() FROM generate_series(1, 50000) g`,
			`INSERT INTO journey_entries (journey_id, contact_id, entries, running, first_entered_at, last_entered_at)
			 SELECT 'j' || (g % 20 + 1), 'c' || g, 1, 1, now(), now() FROM generate_series(1, 50000) g`,
			fillStepRuns,
		},
		SeqScan: true, // the engine's pool plans with the defaults
	}
	plan := stack.GenericPlanWith(t, stack.PG(t), setup, sqlEngineAdvance,
		`'{e1,e2}'`, `'{0,0}'`, `'{t,f}'`, `'{delay,send_email}'`, `'{done,sent}'`, `'{"",m}'`, `'{"",""}'`, `'{completed,completed}'`,
		`'{c1,c2}'`, `'{"",""}'`, `'{2026-01-01T00:00:00Z,2026-01-01T00:00:00Z}'`,
		`'{1,""}'`, `'{send_email,""}'`, `'{sent,""}'`, `'{m1,""}'`, `'{"",""}'`)
	if strings.Contains(plan, "Join Filter") {
		t.Errorf("the generic plan compares row pairs in a nested loop:\n%s", plan)
	}
	if !strings.Contains(plan, "journey_executions_pkey") {
		t.Errorf("the generic plan does not find executions by primary key:\n%s", plan)
	}
}

// TestWakeRelayPlanUsesTheDueIndex: every engine process runs the wake
// relay's statement several times a second, mostly finding nothing. Over
// 100,000 executions (most ended) and 10,000 wake-ups of several scopes,
// its generic plan finds the due wake-ups of its scope through their
// index and each one's execution by primary key, never reading a table
// through.
func TestWakeRelayPlanUsesTheDueIndex(t *testing.T) {
	setup := stack.PlanSetup{
		Tables: []string{"journey_executions", "journey_wakes"},
		Fill: []string{
			`INSERT INTO journey_executions (id, workspace_id, journey_id, version, contact_id, state, position, trigger_type, started_at, updated_at,
			                                 next_wake_at)
			 SELECT 'e' || g, 'w', 'j' || (g % 20 + 1), 1, 'c' || g, CASE WHEN g % 10 = 0 THEN 'active' ELSE 'completed' END, '0', 'api_event',
			        now(), now(), CASE WHEN g % 10 = 0 THEN now() + g * interval '1 second' END
			   FROM generate_series(1, 100000) g`,
			`INSERT INTO journey_wakes (execution_id, scope, due_at, position)
			 SELECT 'e' || g, 'timers_' || (g % 7), now() + g * interval '1 second', '0'
			   FROM generate_series(10, 100000, 10) g`,
		},
		SeqScan: true, // the engine's pool plans with the defaults
	}
	plan := stack.GenericPlanWith(t, stack.PG(t), setup, sqlWakeRelay, `'timers_3'`, `now()`, `1000`)
	// The scratch copy names its indexes after their columns.
	if !strings.Contains(plan, "scope_due_at") || !strings.Contains(plan, "journey_executions_pkey") || !strings.Contains(plan, "Tid Scan") ||
		strings.Contains(plan, "Seq Scan") {
		t.Errorf("the relay's generic plan does not find due wake-ups by their index and executions by key:\n%s", plan)
	}
}

// TestPeekRunsPlanFindsStepsByExecution: every envelope the engine
// handles is first read with PeekRuns, which asks whether the envelope ran
// steps of its execution before. With no index on cause_id alone (migration
// 0085), the generic plan over tables the size of a busy engine's must
// find those steps through the primary key's prefix (the execution's few
// steps), never by reading journey_step_runs through: also before
// journey_step_runs was first analyzed, when the planner guessed about 100
// steps per execution and hashed the whole table on every call instead (an
// EXISTS may be run hashed; a scalar subquery with LIMIT is not).
func TestPeekRunsPlanFindsStepsByExecution(t *testing.T) {
	setup := stack.PlanSetup{
		Tables: []string{"journey_executions", "journey_step_runs", "journeys", "contacts"},
		Fill: []string{
			fillJourneys,
			`INSERT INTO contacts (id, seq, workspace_id, email, status, created_at, updated_at)
			 SELECT 'c' || g, g, 'w', 'c' || g || '@example.com', 'ACTIVE', now(), now() FROM generate_series(1, 50000) g`,
			`INSERT INTO journey_executions (id, workspace_id, journey_id, version, contact_id, state, position, trigger_type, started_at, updated_at)
			 SELECT 'e' || g, 'w', 'j' || (g % 20 + 1), 1, 'c' || g, 'active', '1', 'api_event', now(), now() FROM generate_series(1, 50000) g`,
			fillStepRuns,
		},
		SeqScan: true, // the engine's pool plans with the defaults
	}
	for _, unanalyzed := range [][]string{nil, {"journey_step_runs"}} {
		setup.Unanalyzed = unanalyzed
		plan := stack.GenericPlanWith(t, stack.PG(t), setup, sqlEnginePeekCause, `'{e1,e2}'`, `'{x1,y2}'`)
		if strings.Contains(plan, "Seq Scan on journey_step_runs") || !strings.Contains(plan, "journey_step_runs_pkey") {
			t.Errorf("without statistics of %v, the generic plan does not find an execution's steps by primary key:\n%s", unanalyzed, plan)
		}
	}
}

// TestNoIndexHoldsExecutionState: the columns an ended execution's update
// changes (state, position, next_wake_at, finished_at, updated_at) are in
// no index of journey_executions, neither as a key nor in a predicate, so
// that update is a HOT update (migration 0086).
func TestNoIndexHoldsExecutionState(t *testing.T) {
	pg := stack.PG(t)
	rows, err := pg.Query(context.Background(), `
		SELECT i.indexrelid::regclass::text, a.attname
		  FROM pg_index i
		  JOIN pg_attribute a ON a.attrelid = i.indrelid
		 WHERE i.indrelid = 'journey_executions'::regclass
		   AND a.attname IN ('state', 'position', 'next_wake_at', 'finished_at', 'updated_at')
		   AND (a.attnum = ANY (i.indkey::int2[])
		        OR pg_get_expr(i.indpred, i.indrelid) ~ ('\m' || a.attname || '\M')
		        OR pg_get_expr(i.indexprs, i.indrelid) ~ ('\m' || a.attname || '\M'))`)
	if err != nil {
		t.Fatal(err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var idx, col string
		err := r.Scan(&idx, &col)
		return idx + " holds " + col, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Fatalf("an ended execution's update cannot be HOT: %v", found)
	}
}
