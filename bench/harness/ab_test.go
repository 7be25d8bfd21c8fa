package harness

import (
	"path/filepath"
	"testing"
	"time"

	"sendstream/bench/proc"
)

// Pause must take a system off the CPU and Resume give it back: A/B mode
// measures one system while the other is paused. A shell spinning in a loop
// stands in for the server.
func TestPauseStopsTheSystemsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := t.TempDir()
	p, err := StartProcess("spin", dir, cleanEnv(), filepath.Join(dir, "spin.log"), nil, "sh", "-c", "while :; do :; done")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	s := &System{Server: p}
	used := func() time.Duration {
		t.Helper()
		a, err := proc.CPU(p.PID())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		b, err := proc.CPU(p.PID())
		if err != nil {
			t.Fatal(err)
		}
		return b - a
	}
	if d := used(); d == 0 {
		t.Fatalf("the spinning process used no CPU before the pause")
	}
	s.Pause()
	time.Sleep(50 * time.Millisecond) // the stop is delivered asynchronously
	if d := used(); d != 0 {
		t.Fatalf("a paused system used %v of CPU in 300 ms", d)
	}
	s.Resume()
	if d := used(); d == 0 {
		t.Fatalf("a resumed system used no CPU")
	}
}

// A pair where one side completed nothing is left out of the medians and
// counted, and the line says so.
func TestABSummarySaysWhatWasLeftOut(t *testing.T) {
	ab := &ABReport{Name: "x", RateRatios: []float64{0.9, 1.1}, Void: 1, Median: 1, A: &Report{}, B: &Report{}}
	got := ab.Summary()
	want := "x: A/B rate B/A median 1.000 (pairs 0.900 1.100, 1 left out: a side did nothing) | server+broker cpu/op B/A 0.000 | ratio to baseline A 0.000, B 0.000 | "
	if got != want {
		t.Fatalf("summary\n got %q\nwant %q", got, want)
	}
}
