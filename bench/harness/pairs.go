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
	// Steal of the machine during each side (percent of its CPU time given
	// to other guests; the largest over the baselines of the pair).
	BaselineSteal float64 `json:"baselineSteal"`
	SystemSteal   float64 `json:"systemSteal"`
	Rejected      bool    `json:"rejected,omitempty"`
	Reason        string  `json:"reason,omitempty"`
}

// Pairing decides which pairs count. A pair counts when its baseline is
// within Tolerance (relative) of the median of every baseline measured so far
// (the running median, re-evaluated after each pair, so an early outlier,
// even the first pair, is dropped once the typical value is known); pairs
// are added (redone) until Want of them count or MaxAttempts pairs were
// measured. The result is the median of the counted pairs' ratios.
// It is pure bookkeeping, used from one goroutine.
type Pairing struct {
	Want        int     // pairs needed
	MaxAttempts int     // give up (unstable) after this many pairs
	Tolerance   float64 // e.g. 0.25
	// MaxStealGap rejects a pair whose two sides saw steal differing by
	// more than this many percentage points (0: no check). Steal alike on
	// both sides roughly cancels in the ratio; steal on one side only biases it,
	// either way.
	MaxStealGap float64
	Pairs       []Pair // every pair measured, in order
}

// NewPairing returns a pairing that wants n pairs, tolerates a 25% baseline
// deviation and a 10-point steal gap, and gives up after 3n attempts.
func NewPairing(n int) *Pairing {
	return &Pairing{Want: n, MaxAttempts: 3 * n, Tolerance: 0.25, MaxStealGap: 10}
}

// Add records a pair without steal readings; see AddWithSteal.
func (p *Pairing) Add(baseline, system float64) bool {
	return p.AddWithSteal(baseline, system, 0, 0)
}

// AddWithSteal records a pair and the steal each side saw, and reports
// whether it counts for now (a later pair may move the running median and
// change that).
func (p *Pairing) AddWithSteal(baseline, system, baselineSteal, systemSteal float64) bool {
	pr := Pair{Attempt: len(p.Pairs) + 1, Baseline: baseline, System: system,
		BaselineSteal: baselineSteal, SystemSteal: systemSteal}
	if baseline > 0 {
		pr.Ratio = system / baseline
	}
	p.Pairs = append(p.Pairs, pr)
	p.classify()
	return !p.Pairs[len(p.Pairs)-1].Rejected
}

// classify marks every pair against the median of all baselines so far.
func (p *Pairing) classify() {
	var bs []float64
	for _, q := range p.Pairs {
		if q.Baseline > 0 {
			bs = append(bs, q.Baseline)
		}
	}
	m := Median(bs)
	for i := range p.Pairs {
		q := &p.Pairs[i]
		q.Rejected, q.Reason = false, ""
		switch {
		case q.Baseline <= 0:
			q.Rejected, q.Reason = true, "baseline measured nothing"
		case Strays(q.Baseline, m, p.Tolerance):
			q.Rejected = true
			q.Reason = fmt.Sprintf("baseline %.0f strays %.0f%% from the running median %.0f", q.Baseline, 100*Deviation(q.Baseline, m), m)
		case p.MaxStealGap > 0 && math.Abs(q.BaselineSteal-q.SystemSteal) > p.MaxStealGap:
			q.Rejected = true
			q.Reason = fmt.Sprintf("steal %.0f%% on the baseline side, %.0f%% on the system side", q.BaselineSteal, q.SystemSteal)
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
