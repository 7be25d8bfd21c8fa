package render

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/osteele/liquid/expressions"
	"github.com/osteele/liquid/filters"
	"github.com/osteele/liquid/render"
	"github.com/osteele/liquid/values"
)

// The library path's filters and tags under a Budget. Filters are plain
// functions the library calls without the render's state, so their bounds
// are the budget's limits themselves: no string a filter builds is larger
// than MaxOutputBytes and no list longer than MaxIterations, checked before
// it is built. Over a whole render the tags count: each loop iteration
// (tickTag), each assignment and capture (the sizes a template holds) and
// each byte written, and read the clock between those steps.

// filterSet collects the standard filters so they can be wrapped.
type filterSet map[string]any

func (f filterSet) AddFilter(name string, fn any) { f[name] = fn }

// addBoundedFilters registers the standard filters on cfg, every list
// parameter guarded against a range longer than the budget (the library
// would turn (1..1000000000) into a slice first), and replaces those that
// can build a string or list much larger than their input.
func addBoundedFilters(cfg *render.Config, b Budget) {
	std := filterSet{}
	filters.AddStandardFilters(std)
	maxItems := int(min(b.MaxIterations, int64(maxInt)))
	maxBytes := int(min(b.MaxOutputBytes, int64(maxInt)))
	for name, fn := range std {
		cfg.AddFilter(name, guardLists(fn, maxItems))
	}
	bytesOK := func(n int) {
		if n > maxBytes || n < 0 {
			panic(budgetPanic{BudgetOutput})
		}
	}
	itemsOK := func(n int) {
		if n > maxItems || n < 0 {
			panic(budgetPanic{BudgetIterations})
		}
	}
	cfg.AddFilter("append", func(s, suffix string) string {
		bytesOK(len(s) + len(suffix))
		return s + suffix
	})
	cfg.AddFilter("prepend", func(s, prefix string) string {
		bytesOK(len(s) + len(prefix))
		return prefix + s
	})
	cfg.AddFilter("replace", func(s, old, repl string) string {
		n := strings.Count(s, old) // for old == "": runes + 1, as ReplaceAll
		bytesOK(len(s) + n*(len(repl)-len(old)))
		return strings.ReplaceAll(s, old, repl)
	})
	cfg.AddFilter("replace_first", func(s, old, repl string) string {
		bytesOK(len(s) + len(repl))
		return strings.Replace(s, old, repl, 1)
	})
	cfg.AddFilter("join", guardLists(func(a []any, sep func(string) string) any {
		s := sep(" ")
		var out strings.Builder
		first := true
		for _, v := range a {
			if v == nil {
				continue
			}
			item := fmt.Sprint(v)
			n := out.Len() + len(item)
			if !first {
				n += len(s)
			}
			bytesOK(n)
			if !first {
				out.WriteString(s)
			}
			out.WriteString(item)
			first = false
		}
		return out.String()
	}, maxItems))
	cfg.AddFilter("concat", guardLists(func(a, b []any) []any {
		itemsOK(len(a) + len(b))
		out := make([]any, 0, len(a)+len(b))
		return append(append(out, a...), b...)
	}, maxItems))
	cfg.AddFilter("uniq", guardLists(uniqFilter, maxItems))
	split, ok := std["split"].(func(string, string) any)
	if !ok {
		panic("render: the library's split filter changed its signature")
	}
	cfg.AddFilter("split", func(s, sep string) any {
		itemsOK(splitCount(s, sep))
		return split(s, sep)
	})
}

const maxInt = int(^uint(0) >> 1)

// uniqFilter is the library's uniq (== for comparable items, deep
// equality for the rest) without its quadratic loop: lists and maps of
// JSON values are compared by a canonical key, so a long list of distinct
// objects costs one pass, not a comparison with every item kept.
func uniqFilter(a []any) (result []any) {
	seen := map[any]bool{}
	keys := map[string]bool{}
	var other []any // items without a key: compared as the library does
	var kb strings.Builder
	for _, item := range a {
		if item == nil || isComparableKind(reflect.TypeOf(item).Kind()) {
			if !seen[item] {
				seen[item] = true
				result = append(result, item)
			}
			continue
		}
		kb.Reset()
		if uniqKey(&kb, item) {
			if k := kb.String(); !keys[k] {
				keys[k] = true
				result = append(result, item)
			}
			continue
		}
		dup := false
		for _, o := range other {
			if reflect.DeepEqual(item, o) {
				dup = true
				break
			}
		}
		if !dup {
			other = append(other, item)
			result = append(result, item)
		}
	}
	return result
}

func isComparableKind(k reflect.Kind) bool {
	return k < reflect.Array || k == reflect.Pointer || k == reflect.UnsafePointer
}

// uniqKey writes a key equal for two JSON values exactly when they are
// deeply equal (types included); false for values of other types.
func uniqKey(b *strings.Builder, v any) bool {
	switch x := v.(type) {
	case nil:
		b.WriteString("n;")
	case bool:
		fmt.Fprintf(b, "b%t;", x)
	case string:
		fmt.Fprintf(b, "s%d:%s", len(x), x)
	case float64:
		if x == 0 {
			x = 0 // -0 == 0, as deep equality has it
		}
		fmt.Fprintf(b, "f%v;", x)
	case int:
		fmt.Fprintf(b, "i%d;", x)
	case int64:
		fmt.Fprintf(b, "I%d;", x)
	case []any:
		fmt.Fprintf(b, "l%d[", len(x))
		for _, it := range x {
			if !uniqKey(b, it) {
				return false
			}
		}
		b.WriteByte(']')
	case map[string]any:
		ks := make([]string, 0, len(x))
		for k := range x {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		fmt.Fprintf(b, "m%d{", len(x))
		for _, k := range ks {
			fmt.Fprintf(b, "%d:%s", len(k), k)
			if !uniqKey(b, x[k]) {
				return false
			}
		}
		b.WriteByte('}')
	default:
		return false
	}
	return true
}

// splitCount is at least the number of items split(s, sep) returns.
func splitCount(s, sep string) int {
	switch sep {
	case "":
		return utf8.RuneCountInString(s)
	case " ": // the library splits on runs of [[:space:]]
		n, in := 1, false
		for i := 0; i < len(s); i++ {
			sp := s[i] < utf8.RuneSelf && unicode.IsSpace(rune(s[i]))
			if sp && !in {
				n++
			}
			in = sp
		}
		return n
	}
	return strings.Count(s, sep) + 1
}

var anyType = reflect.TypeOf((*any)(nil)).Elem()

// guardLists returns fn with every list parameter taking any value: a
// range (values.Range, iterated lazily elsewhere) longer than maxItems is
// refused, and every other value is converted as the library would have
// before calling fn. Functions without list parameters are returned as
// they are.
func guardLists(fn any, maxItems int) any {
	ft := reflect.TypeOf(fn)
	in := make([]reflect.Type, ft.NumIn())
	var lists []int
	for i := range in {
		in[i] = ft.In(i)
		if in[i].Kind() == reflect.Slice && !(ft.IsVariadic() && i == len(in)-1) {
			in[i] = anyType
			lists = append(lists, i)
		}
	}
	if len(lists) == 0 {
		return fn
	}
	out := make([]reflect.Type, ft.NumOut())
	for i := range out {
		out[i] = ft.Out(i)
	}
	fv := reflect.ValueOf(fn)
	return reflect.MakeFunc(reflect.FuncOf(in, out, ft.IsVariadic()), func(args []reflect.Value) []reflect.Value {
		for _, i := range lists {
			v := args[i].Interface()
			if r, ok := v.(values.Range); ok && r.Len() > maxItems {
				panic(budgetPanic{BudgetIterations})
			}
			if v == nil {
				args[i] = reflect.Zero(ft.In(i))
			} else {
				args[i] = reflect.ValueOf(values.MustConvert(v, ft.In(i)))
			}
		}
		if ft.IsVariadic() {
			return fv.CallSlice(args)
		}
		return fv.Call(args)
	}).Interface()
}

// assignTag is the assign tag counting the size of what it stores.
func assignTag(source string) (func(io.Writer, render.Context) error, error) {
	stmt, err := expressions.ParseStatement(expressions.AssignStatementSelector, source)
	if err != nil {
		return nil, err
	}
	return func(_ io.Writer, ctx render.Context) error {
		m, err := meterOf(ctx)
		if err != nil {
			return err
		}
		value, err := ctx.Evaluate(stmt.Assignment.ValueFn)
		if err != nil {
			return err
		}
		if !m.hold(stmt.Assignment.Variable, heldSize(value)) {
			return m.err
		}
		ctx.Set(stmt.Assignment.Variable, value)
		return nil
	}, nil
}

// heldSize is what a value costs to hold: a string's bytes, 16 bytes per
// item of a list (its items are values that exist already).
func heldSize(v any) int64 {
	switch x := v.(type) {
	case string:
		return int64(len(x))
	case []any:
		return 16 * int64(len(x))
	case []string:
		return 16 * int64(len(x))
	}
	return 16
}
