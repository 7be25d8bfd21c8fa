package render

import "sync"

// maxSharedEngines bounds the engines Shared keeps: a process has one or
// two render budgets (its configuration), not one per tenant.
const maxSharedEngines = 8

var (
	sharedMu      sync.Mutex
	sharedEngines = map[Budget]*Engine{}
)

// Shared returns the process's Engine for budget b (zero fields take their
// defaults; b must pass Validate), creating it on first use with the
// default cache bound. Every caller asking for the same budget gets the
// same Engine, so a template version is parsed once per process: the send
// path that checks a message and the delivery stage that renders it share
// one bounded cache. Past maxSharedEngines distinct budgets it returns a
// new Engine that is not kept. Safe for concurrent use.
func Shared(b Budget) *Engine {
	b = b.withDefaults()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if e, ok := sharedEngines[b]; ok {
		return e
	}
	e := NewEngineWithBudget(0, b)
	if len(sharedEngines) < maxSharedEngines {
		sharedEngines[b] = e
	}
	return e
}
