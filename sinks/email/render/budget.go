package render

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/osteele/liquid/render"
)

// Budget bounds the work of one render of a message, all its parts
// (subject, preheader, HTML, text) together. Whatever a tenant writes into a
// template, a render ends within these bounds with a *BudgetError. The zero
// value of a field means its default.
type Budget struct {
	// MaxIterations bounds the loop iterations of one render: every
	// iteration of every for and tablerow loop, nested ones included
	// (default 1,000,000). A list built by a filter (split, concat) and a
	// range handed to a filter may not hold more items either.
	MaxIterations int64
	// MaxOutputBytes bounds the bytes one render writes (default 5 MiB).
	// The same bound applies to any one string a filter builds, to a
	// capture block, and to all values a template holds in its assign
	// and capture variables at one time, so memory stays bounded even
	// when nothing is written.
	MaxOutputBytes int64
	// Timeout bounds the time of one render (default 2 s). It is checked
	// between steps (loop iterations, assignments, captures, output), each
	// of which is itself bounded by the other two budgets.
	Timeout time.Duration
}

// Defaults of Budget.
const (
	DefaultMaxIterations  = 1_000_000
	DefaultMaxOutputBytes = 5 << 20
	DefaultRenderTimeout  = 2 * time.Second
)

// DefaultBudget returns the budget an Engine gets from NewEngine.
func DefaultBudget() Budget {
	return Budget{MaxIterations: DefaultMaxIterations, MaxOutputBytes: DefaultMaxOutputBytes, Timeout: DefaultRenderTimeout}
}

// Validate reports a negative field (zero means the default).
func (b Budget) Validate() error {
	switch {
	case b.MaxIterations < 0:
		return fmt.Errorf("render budget: max iterations %d is negative", b.MaxIterations)
	case b.MaxOutputBytes < 0:
		return fmt.Errorf("render budget: max output bytes %d is negative", b.MaxOutputBytes)
	case b.Timeout < 0:
		return fmt.Errorf("render budget: timeout %s is negative", b.Timeout)
	}
	return nil
}

func (b Budget) withDefaults() Budget {
	d := DefaultBudget()
	if b.MaxIterations <= 0 {
		b.MaxIterations = d.MaxIterations
	}
	if b.MaxOutputBytes <= 0 {
		b.MaxOutputBytes = d.MaxOutputBytes
	}
	if b.Timeout <= 0 {
		b.Timeout = d.Timeout
	}
	return b
}

// Kinds of budget a BudgetError names.
const (
	BudgetIterations = "iterations"
	BudgetOutput     = "output"
	BudgetTime       = "time"
)

// BudgetError is a render stopped because it exceeded its Budget. It is
// permanent: the same template and data exceed it again. Its message names
// the part and the budget, e.g. "html: the render exceeded its budget of
// 1000000 loop iterations".
type BudgetError struct {
	Part  string // "subject", "html", …; empty for a lone Template
	Kind  string // BudgetIterations, BudgetOutput or BudgetTime
	Limit string // the limit as the message shows it
}

func (e *BudgetError) Error() string {
	var what string
	switch e.Kind {
	case BudgetIterations:
		what = e.Limit + " loop iterations"
	case BudgetOutput:
		what = e.Limit + " bytes of output"
	default:
		what = e.Limit + " of render time"
	}
	msg := "the render exceeded its budget of " + what
	if e.Part != "" {
		return e.Part + ": " + msg
	}
	return msg
}

// budgetPanic carries a budget failure out of a filter, through the
// library's evaluator (which re-panics values that are not errors), to
// renderLiquid's recover. It is deliberately not an error.
type budgetPanic struct{ kind string }

// meter counts one render's use of its Budget. It is used by one goroutine.
type meter struct {
	b        Budget
	deadline time.Time
	iters    int64
	out      int64 // bytes written by finished parts and the library path
	held     map[string]int64
	heldSum  int64
	steps    uint32
	unclock  int64 // bytes written since the clock was last read
	err      *BudgetError
}

func newMeter(b Budget) *meter {
	return &meter{b: b, deadline: time.Now().Add(b.Timeout)}
}

// fail records the first budget exceeded and returns it.
func (m *meter) fail(kind string) *BudgetError {
	if m.err == nil {
		var limit string
		switch kind {
		case BudgetIterations:
			limit = strconv.FormatInt(m.b.MaxIterations, 10)
		case BudgetOutput:
			limit = strconv.FormatInt(m.b.MaxOutputBytes, 10)
		default:
			kind, limit = BudgetTime, m.b.Timeout.String()
		}
		m.err = &BudgetError{Kind: kind, Limit: limit}
	}
	return m.err
}

// ToLiquid hides the meter from templates (it is reachable under a
// reserved name that a template cannot use anyway).
func (m *meter) ToLiquid() any { return nil }

// iter counts one loop iteration; false means a budget is exceeded.
func (m *meter) iter() bool {
	m.iters++
	if m.iters > m.b.MaxIterations {
		m.fail(BudgetIterations)
		return false
	}
	return m.step()
}

// step is a point between two bounded pieces of work: the clock is read
// every 256 steps.
func (m *meter) step() bool {
	if m.err != nil {
		return false
	}
	m.steps++
	if m.steps&255 == 0 {
		return m.clock()
	}
	return true
}

func (m *meter) clock() bool {
	m.unclock = 0
	if time.Now().After(m.deadline) {
		m.fail(BudgetTime)
		return false
	}
	return true
}

// wrote counts n bytes of output.
func (m *meter) wrote(n int) bool {
	if m.err != nil {
		return false
	}
	m.out += int64(n)
	if m.out > m.b.MaxOutputBytes {
		m.fail(BudgetOutput)
		return false
	}
	if m.unclock += int64(n); m.unclock > 64<<10 {
		return m.clock()
	}
	return m.step()
}

// hold records that variable name now holds size bytes (or items).
func (m *meter) hold(name string, size int64) bool {
	if m.held == nil {
		m.held = map[string]int64{}
	}
	m.heldSum += size - m.held[name]
	m.held[name] = size
	if size > m.b.MaxOutputBytes || m.heldSum > m.b.MaxOutputBytes {
		m.fail(BudgetOutput)
		return false
	}
	if size > 64<<10 {
		return m.clock()
	}
	return m.step()
}

// meterName is the binding under which the library path's tags find the
// render's meter. Sources may not contain the reserved prefix.
const meterName = reservedPrefix + "meter"

// reservedPrefix starts every name the package injects into a template.
const reservedPrefix = "__sendstream_"

// Names of the tags the source rewrite inserts.
const (
	tickName    = reservedPrefix + "tick"    // first in every loop body: counts an iteration
	captureName = reservedPrefix + "capture" // replaces capture: a bounded buffer
)

var errNoMeter = errors.New("render: no budget meter in the render context")

func meterOf(ctx render.Context) (*meter, error) {
	m, ok := ctx.Get(meterName).(*meter)
	if !ok {
		return nil, errNoMeter
	}
	return m, nil
}

// tickTag counts one loop iteration against the budget.
func tickTag(string) (func(io.Writer, render.Context) error, error) {
	return func(_ io.Writer, ctx render.Context) error {
		m, err := meterOf(ctx)
		if err != nil {
			return err
		}
		if !m.iter() {
			return m.err
		}
		return nil
	}, nil
}

// captureTag is the capture block writing into a buffer bounded by the
// output budget; the captured string counts as held.
func captureTag(node render.BlockNode) (func(io.Writer, render.Context) error, error) {
	varname := node.Args
	return func(_ io.Writer, ctx render.Context) error {
		m, err := meterOf(ctx)
		if err != nil {
			return err
		}
		buf := &capWriter{m: m, max: m.b.MaxOutputBytes}
		if err := ctx.RenderChildren(buf); err != nil {
			return err
		}
		s := string(buf.b)
		if !m.hold(varname, int64(len(s))) {
			return m.err
		}
		ctx.Set(varname, s)
		return nil
	}, nil
}

// capWriter collects a capture's text, at most max bytes.
type capWriter struct {
	m   *meter
	max int64
	b   []byte
}

func (w *capWriter) Write(p []byte) (int, error) {
	if int64(len(w.b)+len(p)) > w.max {
		return 0, w.m.fail(BudgetOutput)
	}
	w.b = append(w.b, p...)
	if !w.m.step() {
		return 0, w.m.err
	}
	return len(p), nil
}

// outWriter is the library path's output: counted against the budget.
type outWriter struct {
	m *meter
	w io.Writer
}

func (w outWriter) Write(p []byte) (int, error) {
	if !w.m.wrote(len(p)) {
		return 0, w.m.err
	}
	return w.w.Write(p)
}
