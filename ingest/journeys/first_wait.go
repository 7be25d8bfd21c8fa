package journeys

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	"sendstream/sinks/journeys"
	"sendstream/sinks/timers"
)

// Timers stores many timers in one statement within tx (sinks/timers'
// Timers; the server's is an Inserter: it stores timers, the journey
// engine's processes fire them).
type Timers interface {
	ScheduleMany(ctx context.Context, tx pgx.Tx, ts []timers.Timer) error
}

// firstWaits knows, per journey version (versions never change), whether
// its first step is a wait a start may begin (journeys.StartsWaiting):
// with Deps.Timers, such a start inserts the execution already waiting and
// its timer in the start's transaction, and the engine has nothing to do
// for its started announcement.
type firstWaits struct {
	store *journeys.Store
	mu    sync.Mutex
	known map[versionKey]*journeys.FirstWait // nil value: not a wait
}

type versionKey struct {
	journey string
	version int
}

// get returns the first wait of version v of journey id, nil when that
// step is no such wait or the version cannot be read (the start then goes
// the engine's way).
func (f *firstWaits) get(ctx context.Context, id string, v int) *journeys.FirstWait {
	k := versionKey{id, v}
	f.mu.Lock()
	w, ok := f.known[k]
	f.mu.Unlock()
	if ok {
		return w
	}
	def, err := f.store.Version(ctx, id, v)
	if err != nil {
		return nil // not cached: read again on the next call
	}
	if st, err := def.StepAt("0"); err == nil && journeys.StartsWaiting(st) {
		w = &journeys.FirstWait{Version: v, Step: st}
	}
	f.mu.Lock()
	if len(f.known) > 10000 {
		clear(f.known)
	}
	f.known[k] = w
	f.mu.Unlock()
	return w
}
