package render

import (
	"math"
	"regexp"
	"strconv"

	"github.com/osteele/liquid/parser"
)

// literalRange matches the arguments of a loop over a range of integer
// literals, e.g. "i in (1..100000)" or "i in (1..10) reversed". Loops with
// other modifiers (limit, offset) or bounds that are variables are not
// judged statically: the render's own count stops them.
var literalRange = regexp.MustCompile(`^\s*[A-Za-z_][\w-]*\s+in\s+\(\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*\)\s*(?:reversed\s*)?$`)

// staticIterations is the largest number of iterations that nested loops
// over literal ranges ask for, as written: a loop over (1..1000) inside a
// loop over (1..1000) asks for 1,000,000. It saturates at math.MaxInt64.
// Loops whose count is not a literal count once, so the figure is what the
// literal loops alone would run whenever they run at all.
func staticIterations(src string) int64 {
	var stack []int64 // the product of the open loops' counts
	var most int64
	inRaw, inComment := false, false
	for _, t := range parser.Scan(src, parser.SourceLoc{}, nil) {
		if t.Type != parser.TagTokenType {
			continue
		}
		if inRaw || inComment {
			inRaw = inRaw && t.Name != "endraw"
			inComment = inComment && t.Name != "endcomment"
			continue
		}
		switch t.Name {
		case "raw":
			inRaw = true
		case "comment":
			inComment = true
		case "for", "tablerow":
			outer := int64(1)
			if len(stack) > 0 {
				outer = stack[len(stack)-1]
			}
			n := mulSat(outer, literalCount(t.Args))
			stack = append(stack, n)
			most = max(most, n)
		case "endfor", "endtablerow":
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	return most
}

// literalCount is the number of iterations of a loop over a literal range
// (0 for an empty one), or 1 when the loop's count is not a literal.
func literalCount(args string) int64 {
	m := literalRange.FindStringSubmatch(args)
	if m == nil {
		return 1
	}
	lo, err1 := strconv.ParseInt(m[1], 10, 64)
	hi, err2 := strconv.ParseInt(m[2], 10, 64)
	if err1 != nil || err2 != nil {
		return math.MaxInt64 // bounds beyond int64 ask for more than any budget
	}
	if hi < lo {
		return 0
	}
	if hi-lo < 0 || hi-lo == math.MaxInt64 { // overflow
		return math.MaxInt64
	}
	return hi - lo + 1
}

// mulSat multiplies two non-negative counts, saturating at math.MaxInt64.
func mulSat(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// checkStaticIterations refuses, at parse time, a template whose loops over
// literal ranges alone ask for more iterations than the budget allows: it
// could never render, so it is refused at once instead of after a render
// that runs into the budget.
func checkStaticIterations(src string, b Budget) error {
	n := staticIterations(src)
	if n <= b.MaxIterations {
		return nil
	}
	asked := strconv.FormatInt(n, 10)
	if n == math.MaxInt64 {
		asked = "more than " + strconv.FormatInt(math.MaxInt64-1, 10)
	}
	return &SyntaxError{Msg: "its loops over literal ranges ask for " + asked +
		" iterations, over the render budget of " + strconv.FormatInt(b.MaxIterations, 10) + " loop iterations"}
}
