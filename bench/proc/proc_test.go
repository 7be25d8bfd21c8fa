package proc

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func TestParseStatCountsFieldsAfterTheCommandName(t *testing.T) {
	// comm contains spaces and a ')'; utime=250, stime=50 ticks.
	line := "4242 (my (odd) proc) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 100 1000000 500 18446744073709551615\n"
	d, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if d != 3*time.Second {
		t.Fatalf("got %v, want 3s", d)
	}
	if _, err := parseStat([]byte("12 (x) S 1 2")); err == nil {
		t.Fatal("short line must fail")
	}
}

func TestParseStatus(t *testing.T) {
	b := []byte("Name:\tx\nVmPeak:\t  9000 kB\nVmRSS:\t   1234 kB\nThreads:\t3\n")
	n, err := parseStatusKB(b, "VmRSS:")
	if err != nil || n != 1234*1024 {
		t.Fatalf("%d %v", n, err)
	}
	if _, err := parseStatusKB(b, "VmSwap:"); err == nil {
		t.Fatal("missing key must fail")
	}
}

func TestMeterReadsThisProcess(t *testing.T) {
	self, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	m := &Meter{PIDs: map[string]int{"generator": 0, "gone": 1 << 30},
		Commands: map[string]string{"by-name": commandOf(self), "nobody": "no-such-comm"}}
	m.Start()
	base := cpuTime(t)
	// Spin until the process has used 60 ms of CPU by getrusage, not 60 ms
	// of wall time: beside other test packages on 2 cores, 60 ms of wall
	// time once gave this process only 10 ms of CPU.
	for t0 := time.Now(); cpuTime(t)-base < 60*time.Millisecond && time.Since(t0) < 10*time.Second; {
	}
	m.End()
	used := m.Used()
	if _, ok := used["gone"]; ok {
		t.Fatal("an unreadable process must be left out")
	}
	if used["generator"] < 20*time.Millisecond {
		t.Fatalf("busy loop of 60 ms measured as %v", used["generator"])
	}
	if used["by-name"] < used["generator"] {
		t.Fatalf("this process by command name %q used %v, by pid %v", commandOf(self), used["by-name"], used["generator"])
	}
	if _, ok := used["nobody"]; ok {
		t.Fatal("a command without processes must be left out")
	}
	if per := m.PerOp(1000); per["generator"] < 20 {
		t.Fatalf("per op %v", per)
	}
	if rss, err := RSS(os.Getpid()); err != nil || rss < 1<<20 {
		t.Fatalf("rss %d %v", rss, err)
	}
}

// cpuTime is this process's user+system CPU time by getrusage.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestParseMachineCPU(t *testing.T) {
	c := parseMachineCPU("cpu  100 2 30 500 4 0 6 58 0 0")
	if c.total != 700 || c.steal != 58 || c.busy != 138 {
		t.Fatalf("parseMachineCPU = %+v, want total 700 steal 58 busy 138", c)
	}
	for _, bad := range []string{"cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if c := parseMachineCPU(bad); c != (machineCPU{}) {
			t.Errorf("parseMachineCPU(%q) = %+v, want zero", bad, c)
		}
	}
	m := Meter{PIDs: map[string]int{}}
	m.Start()
	m.End()
	if s := m.StealPercent(); s < 0 || s > 100 {
		t.Errorf("StealPercent = %v", s)
	}
}
