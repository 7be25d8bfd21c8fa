package journeys

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// evaluator evaluates branch conditions for one execution at one moment;
// it reads the contact and decodes the trigger data at most once.
type evaluator struct {
	store *journeys.Store
	q     journeys.Querier
	run   journeys.Run
	now   time.Time

	facts *journeys.Facts
	data  any
	read  bool // data decoded
}

// eval reports whether c holds.
func (e *evaluator) eval(ctx context.Context, c *schemas.JourneyCondition) (bool, error) {
	if c == nil {
		return true, nil
	}
	switch {
	case len(c.All) > 0:
		for i := range c.All {
			if ok, err := e.eval(ctx, &c.All[i]); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case len(c.Any) > 0:
		for i := range c.Any {
			if ok, err := e.eval(ctx, &c.Any[i]); err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case c.Not != nil:
		ok, err := e.eval(ctx, c.Not)
		return !ok, err
	case c.InList != "":
		return e.store.InList(ctx, e.q, e.run.ContactID, c.InList)
	case c.Field != "":
		f, err := e.contact(ctx)
		if err != nil {
			return false, err
		}
		v, ok := f.Fields[c.Field]
		var actual any
		if ok && v != "" {
			actual = v
		}
		return compare(c.Op, actual, c.Value), nil
	case c.CustomField != "":
		f, err := e.contact(ctx)
		if err != nil {
			return false, err
		}
		return compare(c.Op, f.CustomFields[c.CustomField], c.Value), nil
	case c.Property != "":
		return compare(c.Op, e.property(c.Property), c.Value), nil
	case c.Goal != "":
		return e.goal(ctx, c)
	}
	return false, fmt.Errorf("branch condition without a form")
}

func (e *evaluator) contact(ctx context.Context) (*journeys.Facts, error) {
	if e.facts == nil {
		f, err := e.store.ContactFacts(ctx, e.q, e.run.ContactID)
		if err != nil {
			return nil, err
		}
		e.facts = &f
	}
	return e.facts, nil
}

// property follows dot path through the trigger's data (nil when absent).
func (e *evaluator) property(path string) any {
	if !e.read {
		e.read = true
		if len(e.run.Data) > 0 {
			_ = json.Unmarshal(e.run.Data, &e.data) // stored as validated JSON
		}
	}
	v := e.data
	for _, part := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// goal evaluates a goal-totals condition. The goals stage keeps totals of
// purchases only (contact_activity: lifetime value, purchase count, last
// purchase), so a condition on another goal type does not hold.
func (e *evaluator) goal(ctx context.Context, c *schemas.JourneyCondition) (bool, error) {
	if c.Goal != schemas.GoalPurchase {
		return false, nil
	}
	f, err := e.contact(ctx)
	if err != nil {
		return false, err
	}
	if c.CountAtLeast != nil && f.PurchaseCount < *c.CountAtLeast {
		return false, nil
	}
	if c.ValueAtLeast != nil && f.LifetimeValue < *c.ValueAtLeast {
		return false, nil
	}
	if c.LastWithin != "" {
		d, _ := schemas.ParseJourneyDuration(c.LastWithin)
		if f.LastPurchaseAt == nil || e.now.Sub(*f.LastPurchaseAt) > d {
			return false, nil
		}
	}
	return true, nil
}

// compare applies op to actual (a decoded JSON value, nil when absent) and
// the condition's value: numbers as numbers (numeric strings count),
// RFC 3339 times as times, other strings as strings.
func compare(op string, actual any, raw json.RawMessage) bool {
	if op == schemas.OpExists {
		return actual != nil
	}
	var want any
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &want) // validated by ParseJourney
	}
	switch op {
	case schemas.OpEq:
		return equal(actual, want)
	case schemas.OpNe:
		return !equal(actual, want)
	case schemas.OpContains:
		a, ok1 := actual.(string)
		w, ok2 := want.(string)
		return ok1 && ok2 && strings.Contains(a, w)
	}
	if actual == nil || want == nil {
		return false
	}
	c, ok := order(actual, want)
	if !ok {
		return false
	}
	switch op {
	case schemas.OpGt:
		return c > 0
	case schemas.OpGte:
		return c >= 0
	case schemas.OpLt:
		return c < 0
	case schemas.OpLte:
		return c <= 0
	}
	return false
}

func equal(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if c, ok := order(a, b); ok {
		return c == 0
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// order compares a and b: -1, 0, 1, and whether they are comparable.
func order(a, b any) (int, bool) {
	if x, ok := number(a); ok {
		if y, ok := number(b); ok {
			return cmp3(x < y, x > y), true
		}
	}
	as, ok1 := a.(string)
	bs, ok2 := b.(string)
	if !ok1 || !ok2 {
		if ab, ok := a.(bool); ok {
			if bb, ok := b.(bool); ok && ab == bb {
				return 0, true
			}
		}
		return 0, false
	}
	if ta, err := time.Parse(time.RFC3339Nano, as); err == nil {
		if tb, err := time.Parse(time.RFC3339Nano, bs); err == nil {
			return cmp3(ta.Before(tb), ta.After(tb)), true
		}
	}
	return strings.Compare(as, bs), true
}

func cmp3(less, more bool) int {
	switch {
	case less:
		return -1
	case more:
		return 1
	}
	return 0
}

// number is v as a number: a JSON number, or a string holding one.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	}
	return 0, false
}
