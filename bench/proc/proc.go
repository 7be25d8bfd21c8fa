// Package proc reads a process's CPU time and resident memory from /proc, for
// the benchmark's secondary figures (CPU-µs per request, RSS at a fixed rate).
package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat. USER_HZ is
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// CPU returns the user plus system CPU time the process (all its threads) has
// used so far, from /proc/<pid>/stat; pid 0 means this process.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(statPath(pid, "stat"))
	if err != nil {
		return 0, fmt.Errorf("read cpu of %d: %w", pid, err)
	}
	return parseStat(b)
}

// RSS returns the process's resident set size in bytes (VmRSS of
// /proc/<pid>/status); pid 0 means this process.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(statPath(pid, "status"))
	if err != nil {
		return 0, fmt.Errorf("read rss of %d: %w", pid, err)
	}
	return parseStatusKB(b, "VmRSS:")
}

func statPath(pid int, file string) string {
	if pid == 0 {
		return "/proc/self/" + file
	}
	return "/proc/" + strconv.Itoa(pid) + "/" + file
}

// parseStat extracts utime+stime (fields 14 and 15). The command name (field
// 2) is in parentheses and may contain spaces, so fields are counted after
// the last ')'.
func parseStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("parse stat: %d fields", len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse stat: utime %q stime %q", f[11], f[12])
	}
	return time.Duration(ut+st) * clockTick, nil
}

// parseStatusKB returns the value of a "Key:   123 kB" line in bytes.
func parseStatusKB(b []byte, key string) (int64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, key) {
			continue
		}
		f := strings.Fields(line[len(key):])
		if len(f) < 1 {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s %q: %w", key, f[0], err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("parse status: no %s line", key)
}

// Meter reads the CPU time of several processes at two instants.
// It is used from one goroutine.
type Meter struct {
	PIDs map[string]int // role ("server", "broker", "generator") to pid; 0 = this process
	// Commands maps a role to a command name (the comm of /proc/<pid>/stat,
	// at most 15 bytes): the role's CPU is that of every process so named,
	// e.g. all of Postgres's backends. A process that exits between Start
	// and End is left out; one that starts in between counts whole.
	Commands map[string]string
	start    map[string]time.Duration
	end      map[string]time.Duration
	// cmdStart and cmdEnd are the CPU times of the Commands processes by pid.
	cmdStart, cmdEnd map[int]commandCPU

	machineStart, machineEnd machineCPU
}

// Start records each process's CPU time now; unreadable ones are skipped.
func (m *Meter) Start() {
	m.start, m.cmdStart, m.machineStart = m.read(), m.readCommands(), readMachineCPU()
}

// End records each process's CPU time now.
func (m *Meter) End() { m.end, m.cmdEnd, m.machineEnd = m.read(), m.readCommands(), readMachineCPU() }

// commandCPU is one process of a Commands role.
type commandCPU struct {
	role string
	cpu  time.Duration
}

// readCommands reads the CPU time of every process whose command is one of
// Commands' names.
func (m *Meter) readCommands() map[int]commandCPU {
	if len(m.Commands) == 0 {
		return nil
	}
	roles := make(map[string]string, len(m.Commands))
	for role, cmd := range m.Commands {
		roles[cmd] = role
	}
	dirs, _ := os.ReadDir("/proc")
	out := map[int]commandCPU{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(statPath(pid, "stat"))
		if err != nil {
			continue
		}
		role, ok := roles[commandOf(b)]
		if !ok {
			continue
		}
		if c, err := parseStat(b); err == nil {
			out[pid] = commandCPU{role: role, cpu: c}
		}
	}
	return out
}

// commandOf returns the command name of a /proc/<pid>/stat line: field 2,
// between the first '(' and the last ')'.
func commandOf(stat []byte) string {
	i, j := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if i < 0 || j < i {
		return ""
	}
	return string(stat[i+1 : j])
}

// StealPercent is the share of the machine's CPU time between Start and
// End that the hypervisor gave to other guests (/proc/stat "steal"): on a
// shared VM, the part of a run's noise that no code change explains. 0
// when /proc/stat could not be read.
func (m *Meter) StealPercent() float64 {
	total := m.machineEnd.total - m.machineStart.total
	if total <= 0 || m.machineStart.total == 0 {
		return 0
	}
	return round2(100 * float64(m.machineEnd.steal-m.machineStart.steal) / float64(total))
}

// machineCPU is the first line of /proc/stat: all CPUs' time in ticks.
// busy is what no guest but this one spent: total less idle, iowait and
// steal.
type machineCPU struct{ total, steal, busy int64 }

func readMachineCPU() machineCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseMachineCPU(line)
}

// parseMachineCPU reads "cpu user nice system idle iowait irq softirq
// steal ...": total is the sum of the first eight fields (guest time is
// already inside user), steal the eighth, busy the rest less idle and
// iowait.
func parseMachineCPU(line string) machineCPU {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineCPU{}
	}
	var c machineCPU
	for i, s := range f[1:9] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return machineCPU{}
		}
		c.total += n
		switch i {
		case 3, 4: // idle, iowait
		case 7:
			c.steal = n
		default:
			c.busy += n
		}
	}
	return c
}

func (m *Meter) read() map[string]time.Duration {
	out := make(map[string]time.Duration, len(m.PIDs))
	for role, pid := range m.PIDs {
		if c, err := CPU(pid); err == nil {
			out[role] = c
		}
	}
	return out
}

// PerOp returns, per role, the CPU microseconds used between Start and End
// divided by ops. Roles not read at both instants are left out. The role
// "machine" is every process's CPU (all cores' busy time in /proc/stat):
// with Postgres, ClickHouse and the generator, what an operation costs the
// whole host.
func (m *Meter) PerOp(ops float64) map[string]float64 {
	out := map[string]float64{}
	if ops <= 0 {
		return out
	}
	if m.machineStart.total > 0 && m.machineEnd.total > 0 {
		busy := time.Duration(m.machineEnd.busy-m.machineStart.busy) * clockTick
		out["machine"] = round2(float64(busy) / float64(time.Microsecond) / ops)
	}
	for role, used := range m.Used() {
		out[role] = round2(float64(used) / float64(time.Microsecond) / ops)
	}
	return out
}

// Used returns, per role, the CPU time used between Start and End.
func (m *Meter) Used() map[string]time.Duration {
	out := map[string]time.Duration{}
	for role, s := range m.start {
		if e, ok := m.end[role]; ok {
			out[role] = e - s
		}
	}
	if m.cmdStart != nil && m.cmdEnd != nil {
		for pid, e := range m.cmdEnd {
			out[e.role] += e.cpu - m.cmdStart[pid].cpu
		}
	}
	return out
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
