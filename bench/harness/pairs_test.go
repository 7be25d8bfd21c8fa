package harness

import (
	"math"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1}, 2}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), tc.in...)
		if got := Median(tc.in); got != tc.want {
			t.Fatalf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Fatal("Median must not reorder its input")
			}
		}
	}
}

func TestPairingTakesTheMedianRatioOfStablePairs(t *testing.T) {
	p := NewPairing(3)
	for _, bs := range [][2]float64{{100, 60}, {110, 77}, {95, 57}} {
		if !p.Add(bs[0], bs[1]) {
			t.Fatalf("pair %v rejected: %+v", bs, p.Pairs)
		}
	}
	if !p.Done() || !p.Stable() {
		t.Fatal("three stable pairs should finish")
	}
	// ratios 0.60, 0.70, 0.60 → median 0.60
	if got := p.MedianRatio(); math.Abs(got-0.60) > 1e-9 {
		t.Fatalf("median ratio %v", got)
	}
}

func TestPairingRedoesAPairWhoseBaselineStrays(t *testing.T) {
	p := NewPairing(3)
	p.Add(100, 60)
	p.Add(104, 62)
	if p.Add(140, 62) { // 37% above the running median of 102
		t.Fatal("a straying baseline must be redone")
	}
	if p.Done() {
		t.Fatal("only two pairs count so far")
	}
	p.Add(98, 61)
	if !p.Done() || len(p.Accepted()) != 3 || p.Pairs[2].Reason == "" {
		t.Fatalf("pairs %+v", p.Pairs)
	}
	if r := p.MedianRatio(); r < 0.59 || r > 0.63 {
		t.Fatalf("the rejected pair must not count: %v", r)
	}
}

func TestPairingCatchesAnOutlierFirstPair(t *testing.T) {
	p := NewPairing(3)
	p.Add(200, 100) // the machine was quiet only for this one
	if p.Add(100, 50) {
		t.Fatal("median 150: 100 strays 33%")
	}
	if len(p.Accepted()) != 0 {
		t.Fatalf("two pairs 2× apart: neither can be trusted yet: %+v", p.Pairs)
	}
	if !p.Add(100, 50) || len(p.Accepted()) != 2 {
		t.Fatalf("median 100: both 100s count: %+v", p.Pairs)
	}
	if p.Done() {
		t.Fatal("only two pairs count")
	}
	p.Add(101, 50)
	if !p.Done() || !p.Stable() {
		t.Fatalf("pairs %+v", p.Pairs)
	}
	for _, q := range p.Accepted() {
		if q.Baseline == 200 {
			t.Fatal("outlier first pair still counted")
		}
	}
	if p.Pairs[0].Reason == "" {
		t.Fatal("a dropped pair says why")
	}
}

func TestPairingGivesUpWhenTheMachineNeverSettles(t *testing.T) {
	p := NewPairing(2)
	for i, b := range []float64{100, 200, 50, 400, 25, 800} {
		p.Add(b, 1)
		if p.Done() != (i == 5) {
			t.Fatalf("after %d pairs Done=%v", i+1, p.Done())
		}
	}
	if p.Stable() {
		t.Fatal("should be unstable")
	}
	if !(NewPairing(1).Add(0, 5) == false) {
		t.Fatal("a zero baseline must be rejected")
	}
}

// TestPairingRejectsUnequalSteal: a pair whose sides saw steal more than
// MaxStealGap points apart is redone; equal steal on both sides counts.
func TestPairingRejectsUnequalSteal(t *testing.T) {
	p := NewPairing(2)
	if !p.AddWithSteal(100, 60, 30, 28) {
		t.Fatal("pair with steal 30%/28% rejected")
	}
	if p.AddWithSteal(100, 40, 4, 36) {
		t.Fatal("pair with steal 4%/36% counted")
	}
	if r := p.Pairs[1].Reason; !strings.Contains(r, "steal 4% on the baseline side, 36% on the system side") {
		t.Fatalf("reason %q", r)
	}
	if !p.AddWithSteal(100, 62, 0, 5) || !p.Done() || p.MedianRatio() != 0.61 {
		t.Fatalf("after a third pair: done %v, median %v", p.Done(), p.MedianRatio())
	}
	off := &Pairing{Want: 1, MaxAttempts: 3, Tolerance: 0.25}
	if !off.AddWithSteal(100, 40, 0, 90) {
		t.Fatal("MaxStealGap 0 should not check steal")
	}
}
