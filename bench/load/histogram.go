package load

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Log-linear buckets: values below 2^subBits ns are counted exactly; above,
// every power of two is split into 2^subBits equal sub-buckets, so a recorded
// value is known to within 1/128 (< 0.8%) of itself. Values at or above
// 2^maxExp ns (about 18 minutes) land in the last bucket.
const (
	subBits   = 7
	subCount  = 1 << subBits
	maxExp    = 40
	bucketLen = subCount + (maxExp-subBits)*subCount + 1 // last: overflow
)

// Histogram counts durations in log-linear buckets, in the manner of
// HdrHistogram but without its dependency. Record is safe for concurrent use
// (atomic adds, no locks); read it (Quantile, Summary, Merge) once the writers
// are done.
type Histogram struct {
	counts [bucketLen]uint64
	total  uint64
	sum    uint64 // nanoseconds; overflows only after ~584 years of latency
	min    uint64 // stored as ^v so that the zero value means "no value"
	max    uint64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return &Histogram{} }

// bucketOf returns the bucket index of a value in nanoseconds.
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	e := bits.Len64(v) - 1 // v in [2^e, 2^(e+1))
	if e >= maxExp {
		return bucketLen - 1
	}
	sub := int(v>>(uint(e)-subBits)) - subCount
	return subCount + (e-subBits)*subCount + sub
}

// bucketBounds returns the smallest and largest value a bucket holds.
func bucketBounds(i int) (lo, hi uint64) {
	if i < subCount {
		return uint64(i), uint64(i)
	}
	e := (i-subCount)/subCount + subBits
	sub := uint64((i-subCount)%subCount) + subCount
	shift := uint(e) - subBits
	lo = sub << shift
	hi = lo + (uint64(1) << shift) - 1
	if i == bucketLen-1 {
		hi = math.MaxUint64
	}
	return lo, hi
}

// Record counts one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	atomic.AddUint64(&h.counts[bucketOf(v)], 1)
	atomic.AddUint64(&h.total, 1)
	atomic.AddUint64(&h.sum, v)
	for {
		m := atomic.LoadUint64(&h.max)
		if v <= m || atomic.CompareAndSwapUint64(&h.max, m, v) {
			break
		}
	}
	for {
		m := atomic.LoadUint64(&h.min)
		if ^v <= m || atomic.CompareAndSwapUint64(&h.min, m, ^v) {
			break
		}
	}
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return atomic.LoadUint64(&h.total) }

// Max is the largest recorded value (exact).
func (h *Histogram) Max() time.Duration { return time.Duration(atomic.LoadUint64(&h.max)) }

// Min is the smallest recorded value (exact); zero when empty.
func (h *Histogram) Min() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(^atomic.LoadUint64(&h.min))
}

// Mean is the arithmetic mean of the recorded values (exact).
func (h *Histogram) Mean() time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	return time.Duration(atomic.LoadUint64(&h.sum) / n)
}

// Quantile returns the value at quantile q (0 < q <= 1): the highest value of
// the bucket holding the ceil(q*count)-th smallest value, capped at Max, so it
// errs high by less than 0.8%, never low. Zero when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	var seen uint64
	for i := range h.counts {
		seen += atomic.LoadUint64(&h.counts[i])
		if seen >= rank {
			_, hi := bucketBounds(i)
			if m := uint64(h.Max()); hi > m {
				hi = m
			}
			return time.Duration(hi)
		}
	}
	return h.Max()
}

// Merge adds every value of o into h. Not safe while o is being written.
func (h *Histogram) Merge(o *Histogram) {
	if o.Count() == 0 {
		return
	}
	for i := range o.counts {
		if c := o.counts[i]; c != 0 {
			atomic.AddUint64(&h.counts[i], c)
		}
	}
	atomic.AddUint64(&h.total, o.total)
	atomic.AddUint64(&h.sum, o.sum)
	if o.max > h.max {
		h.max = o.max
	}
	if o.min > h.min {
		h.min = o.min
	}
}

// Summary is the JSON form of a latency distribution, in milliseconds.
type Summary struct {
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"meanMs"`
	MinMs  float64 `json:"minMs"`
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
	MaxMs  float64 `json:"maxMs"`
}

// Summary returns the count, mean and the p50/p90/p99/p999 percentiles.
func (h *Histogram) Summary() Summary {
	return Summary{
		Count:  h.Count(),
		MeanMs: Ms(h.Mean()),
		MinMs:  Ms(h.Min()),
		P50Ms:  Ms(h.Quantile(0.50)),
		P90Ms:  Ms(h.Quantile(0.90)),
		P99Ms:  Ms(h.Quantile(0.99)),
		P999Ms: Ms(h.Quantile(0.999)),
		MaxMs:  Ms(h.Max()),
	}
}

// Ms converts a duration to fractional milliseconds, rounded to 1 µs.
func Ms(d time.Duration) float64 {
	return math.Round(float64(d)/1e3) / 1e3
}

// Buckets returns the non-empty buckets as [highest value in ns, count]
// pairs, in increasing order: the raw distribution, for the JSON results.
func (h *Histogram) Buckets() [][2]uint64 {
	var out [][2]uint64
	for i := range h.counts {
		if c := atomic.LoadUint64(&h.counts[i]); c != 0 {
			_, hi := bucketBounds(i)
			out = append(out, [2]uint64{hi, c})
		}
	}
	return out
}
