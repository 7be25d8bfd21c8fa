package harness

import (
	"fmt"
	"math"
	"sort"
)

// Pair is one baseline run followed by one system run.
type Pair struct {
	Attempt  int     `json:"attempt"` // 1-based, counting redone pairs
	Baseline float64 `json:"baseline"`
	System   float64 `json:"system"`
	Ratio    float64 `json:"ratio"`
	Rejected bool    `json:"rejected,omitempty"`
	Reason   string  `json:"reason,omitempty"`
}

// Pairing decides which pairs count. A pair is redone when its baseline
// strays more than Tolerance (relative) from the running median of the
// baselines measured before it, and, once Want pairs are accepted, from the
// median of the accepted baselines (so a first pair that was the outlier is
// caught too). The result is the median of the accepted pairs' ratios.
// It is pure bookkeeping, used from one goroutine.
type Pairing struct {
	Want        int     // pairs needed
	MaxAttempts int     // give up (unstable) after this many pairs
	Tolerance   float64 // e.g. 0.25
	Pairs       []Pair  // every pair measured, in order
}

// NewPairing returns a pairing that wants n pairs, tolerates a 25% baseline
// deviation and gives up after 3n attempts.
func NewPairing(n int) *Pairing {
	return &Pairing{Want: n, MaxAttempts: 3 * n, Tolerance: 0.25}
}

// Add records a pair and reports whether it was accepted (for now: a later
// pair may still reject it through the final check).
func (p *Pairing) Add(baseline, system float64) bool {
	pr := Pair{Attempt: len(p.Pairs) + 1, Baseline: baseline, System: system}
	if baseline > 0 {
		pr.Ratio = system / baseline
	}
	var prev []float64
	for _, q := range p.Pairs {
		prev = append(prev, q.Baseline)
	}
	switch {
	case baseline <= 0:
		pr.Rejected, pr.Reason = true, "baseline measured nothing"
	case len(prev) > 0:
		if m := Median(prev); Strays(baseline, m, p.Tolerance) {
			pr.Rejected = true
			pr.Reason = fmt.Sprintf("baseline %.0f strays %.0f%% from running median %.0f", baseline, 100*Deviation(baseline, m), m)
		}
	}
	p.Pairs = append(p.Pairs, pr)
	if len(p.accepted()) >= p.Want {
		p.finalCheck()
	}
	return !p.Pairs[len(p.Pairs)-1].Rejected
}

// finalCheck rejects accepted pairs whose baseline strays from the median of
// the accepted baselines.
func (p *Pairing) finalCheck() {
	var bs []float64
	for _, i := range p.accepted() {
		bs = append(bs, p.Pairs[i].Baseline)
	}
	m := Median(bs)
	for _, i := range p.accepted() {
		if b := p.Pairs[i].Baseline; Strays(b, m, p.Tolerance) {
			p.Pairs[i].Rejected = true
			p.Pairs[i].Reason = fmt.Sprintf("baseline %.0f strays %.0f%% from the accepted median %.0f", b, 100*Deviation(b, m), m)
		}
	}
}

func (p *Pairing) accepted() []int {
	var out []int
	for i, q := range p.Pairs {
		if !q.Rejected {
			out = append(out, i)
		}
	}
	return out
}

// Accepted returns the pairs that count.
func (p *Pairing) Accepted() []Pair {
	var out []Pair
	for _, i := range p.accepted() {
		out = append(out, p.Pairs[i])
	}
	return out
}

// Done reports whether enough pairs are accepted or the attempts ran out.
func (p *Pairing) Done() bool {
	return len(p.accepted()) >= p.Want || len(p.Pairs) >= p.MaxAttempts
}

// Stable reports whether Want pairs were accepted.
func (p *Pairing) Stable() bool { return len(p.accepted()) >= p.Want }

// MedianRatio is the median of the accepted pairs' ratios (0 if none).
func (p *Pairing) MedianRatio() float64 {
	var rs []float64
	for _, q := range p.Accepted() {
		rs = append(rs, q.Ratio)
	}
	return Median(rs)
}

// Median returns the median of xs (the mean of the middle two for an even
// count); 0 for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Deviation is |x-ref|/ref.
func Deviation(x, ref float64) float64 {
	if ref == 0 {
		return math.Inf(1)
	}
	return math.Abs(x-ref) / ref
}

// Strays reports whether x deviates from ref by more than tol.
func Strays(x, ref, tol float64) bool { return Deviation(x, ref) > tol }
