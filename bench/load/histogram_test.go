package load

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

func TestBucketsCoverEveryValueWithinPrecision(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 4095, 1 << 20, 123456789, 1<<40 - 1} {
		i := bucketOf(v)
		lo, hi := bucketBounds(i)
		if v < lo || v > hi {
			t.Fatalf("value %d in bucket %d [%d,%d]", v, i, lo, hi)
		}
		if float64(hi-lo) > float64(v)/subCount+1 {
			t.Fatalf("bucket %d [%d,%d] wider than 1/%d of %d", i, lo, hi, subCount, v)
		}
		if i < prev {
			t.Fatalf("bucket index not monotonic at %d", v)
		}
		prev = i
	}
	// Adjacent buckets tile the range without gaps.
	for i := 1; i < bucketLen-1; i++ {
		_, hiPrev := bucketBounds(i - 1)
		lo, _ := bucketBounds(i)
		if lo != hiPrev+1 {
			t.Fatalf("gap between bucket %d (hi %d) and %d (lo %d)", i-1, hiPrev, i, lo)
		}
	}
	if bucketOf(1<<62) != bucketLen-1 {
		t.Fatal("huge values must land in the last bucket")
	}
}

func TestQuantilesMatchSortedSamples(t *testing.T) {
	h := NewHistogram()
	r := rand.New(rand.NewPCG(1, 2))
	var vals []time.Duration
	for i := 0; i < 100000; i++ {
		// log-normal-ish: 50 µs .. 200 ms
		d := time.Duration(50e3 * (1 + r.ExpFloat64()*r.ExpFloat64()*20))
		vals = append(vals, d)
		h.Record(d)
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		exact := vals[int(q*float64(len(vals)))-1]
		got := h.Quantile(q)
		if got < exact || float64(got) > float64(exact)*(1+1.0/subCount)+1 {
			t.Fatalf("q%v: got %v, exact %v", q, got, exact)
		}
	}
	if h.Max() != vals[len(vals)-1] || h.Min() != vals[0] || h.Count() != 100000 {
		t.Fatalf("min/max/count: %v %v %d", h.Min(), h.Max(), h.Count())
	}
}

func TestMergeAndEmpty(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	if a.Quantile(0.99) != 0 || a.Mean() != 0 || a.Min() != 0 {
		t.Fatal("empty histogram must report zeros")
	}
	a.Record(time.Millisecond)
	b.Record(3 * time.Millisecond)
	b.Record(5 * time.Microsecond)
	a.Merge(b)
	if a.Count() != 3 || a.Max() != 3*time.Millisecond || a.Min() != 5*time.Microsecond {
		t.Fatalf("merged: count %d max %v min %v", a.Count(), a.Max(), a.Min())
	}
	if a.Quantile(0.5) < time.Millisecond || a.Quantile(0.5) > time.Millisecond*1009/1000 {
		t.Fatalf("merged median %v", a.Quantile(0.5))
	}
	bk := a.Buckets()
	if len(bk) != 3 || bk[0][1] != 1 || bk[0][0] < 5000 || bk[2][0] < 3000000 {
		t.Fatalf("buckets %v", bk)
	}
	a.Record(-time.Second)
	if a.Min() != 0 {
		t.Fatal("negative durations count as zero")
	}
}
