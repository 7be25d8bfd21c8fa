package pipeline

import (
	"math/rand/v2"
	"testing"
)

func TestPartAcksCommitsOnlyTheContiguousPrefix(t *testing.T) {
	type step struct {
		ack      int   // index into offsets to finish
		wantNext int64 // committable offset after it; -1: nothing yet
	}
	tests := []struct {
		name    string
		offsets []int64
		steps   []step
	}{
		{"in order", []int64{10, 11, 12}, []step{{0, 11}, {1, 12}, {2, 13}}},
		{"out of order waits for the first", []int64{10, 11, 12}, []step{{2, -1}, {1, -1}, {0, 13}}},
		{"a hole in the middle holds the rest", []int64{5, 6, 7, 8}, []step{{0, 6}, {2, 6}, {3, 6}, {1, 9}}},
		{"gaps in offsets (compaction, markers)", []int64{3, 7, 20}, []step{{1, -1}, {0, 8}, {2, 21}}},
		{"an ack twice changes nothing", []int64{1, 2}, []step{{1, -1}, {1, -1}, {0, 3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPartAcks()
			seqs := make([]int64, len(tc.offsets))
			for i, o := range tc.offsets {
				seqs[i] = p.add(o, 4)
			}
			if _, _, ok := p.committable(); ok {
				t.Fatal("committable before any ack")
			}
			for i, s := range tc.steps {
				p.ack(seqs[s.ack])
				next, epoch, ok := p.committable()
				if s.wantNext < 0 {
					if ok {
						t.Fatalf("step %d (ack offset %d): committable %d, want nothing", i, tc.offsets[s.ack], next)
					}
					continue
				}
				if !ok || next != s.wantNext || epoch != 4 {
					t.Fatalf("step %d (ack offset %d): committable %d epoch %d ok %v, want %d epoch 4", i, tc.offsets[s.ack], next, epoch, ok, s.wantNext)
				}
			}
		})
	}
}

// TestPartAcksNeverPassesAnInFlightOffset finishes records in random order,
// with more added while others are in flight, and checks after every step
// that the commit position is exactly the first unfinished offset.
func TestPartAcksNeverPassesAnInFlightOffset(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := newPartAcks()
	type rec struct {
		off  int64
		seq  int64
		done bool
	}
	var recs []*rec
	var open []*rec
	off := int64(100)
	for step := 0; step < 20000; step++ {
		if len(open) == 0 || (len(open) < 64 && rng.IntN(2) == 0) {
			off += 1 + int64(rng.IntN(3))
			r := &rec{off: off}
			r.seq = p.add(off, 0)
			recs, open = append(recs, r), append(open, r)
			continue
		}
		i := rng.IntN(len(open))
		r := open[i]
		open = append(open[:i], open[i+1:]...)
		r.done = true
		p.ack(r.seq)

		var want int64 = -1
		for _, x := range recs {
			if !x.done {
				break
			}
			want = x.off + 1
		}
		next, _, ok := p.committable()
		if want < 0 && ok || want >= 0 && (!ok || next != want) {
			t.Fatalf("step %d: committable %d (ok %v), want %d", step, next, ok, want)
		}
		for _, x := range recs {
			if !x.done && ok && next > x.off {
				t.Fatalf("step %d: committable %d passes in-flight offset %d", step, next, x.off)
			}
		}
		if len(open) == 0 && p.pending() != 0 {
			t.Fatalf("step %d: nothing in flight but %d pending", step, p.pending())
		}
	}
	if len(p.offs) > 200 {
		t.Fatalf("tracker holds %d records with at most 64 in flight: finished prefix not dropped", len(p.offs))
	}
}
