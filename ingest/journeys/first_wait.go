package journeys

import (
	"context"
	"sync"

	"sendstream/sinks/journeys"
)

// firstWaits knows, per journey version (versions never change), whether
// its first step is a wait a start may begin (journeys.StartsWaiting):
// with Deps.WakeScope, such a start inserts the execution already waiting,
// its own timer, and the engine has nothing to do for its started
// announcement.
type firstWaits struct {
	store *journeys.Store
	scope string // the wake relay's (FirstWait.Scope)
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
		w = &journeys.FirstWait{Version: v, Step: st, Scope: f.scope}
	}
	f.mu.Lock()
	if len(f.known) > 10000 {
		clear(f.known)
	}
	f.known[k] = w
	f.mu.Unlock()
	return w
}
