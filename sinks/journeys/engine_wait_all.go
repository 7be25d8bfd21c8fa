package journeys

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed sql/engine_wait_all.sql
var sqlEngineWaitAll string

// WaitStart is an execution entering a wait: at step Position, waiting
// until Until for Event ("" for none).
type WaitStart struct {
	ExecutionID string
	Position    string
	Until       time.Time
	Event       string
}

// WaitAll moves many executions into their waits within tx, in one
// statement: each is locked and moved only if it is still active at its
// Position, waiting for nothing, and its journey is active (what LockRun
// lets the engine check and Wait then writes, for one). moved[i] reports
// whether in[i] was; the caller commits their timers in tx too. No two
// elements may name one execution.
func (s *Store) WaitAll(ctx context.Context, tx pgx.Tx, in []WaitStart) (moved []bool, err error) {
	ids, pos, until, event := make([]string, len(in)), make([]string, len(in)), make([]time.Time, len(in)), make([]string, len(in))
	at := make(map[string]int, len(in))
	for i, w := range in {
		if _, dup := at[w.ExecutionID]; dup {
			return nil, fmt.Errorf("begin waits: execution %s twice", w.ExecutionID)
		}
		at[w.ExecutionID] = i
		ids[i], pos[i], until[i], event[i] = w.ExecutionID, w.Position, w.Until.UTC(), w.Event
	}
	rows, err := tx.Query(ctx, sqlEngineWaitAll, ids, pos, until, event, s.now().UTC())
	if err != nil {
		return nil, fmt.Errorf("begin the waits of %d executions: %w", len(in), err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("begin the waits of %d executions: %w", len(in), err)
	}
	moved = make([]bool, len(in))
	for _, id := range got {
		if i, ok := at[id]; ok {
			moved[i] = true
		}
	}
	return moved, nil
}
