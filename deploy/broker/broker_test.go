package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The broker runs in a child process (this test binary re-executed), so
// that the test can SIGKILL it like a crash.
const brokerHelperEnv = "SENDSTREAM_TEST_BROKER_HELPER"

func TestBrokerHelperProcess(t *testing.T) {
	if os.Getenv(brokerHelperEnv) != "1" {
		t.Skip("helper process for the broker tests, not a test by itself")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	if err := Run(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func helperBrokerCmd(dir, listen string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrokerHelperProcess$", "--",
		"--data-dir", dir, "--listen", listen)
	cmd.Env = append(os.Environ(), brokerHelperEnv+"=1")
	return cmd
}

// startHelperBroker starts a broker process on dir and waits for its address.
func startHelperBroker(t *testing.T, dir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := helperBrokerCmd(dir, "127.0.0.1:0")
	log, err := os.OpenFile(filepath.Join(dir+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	_ = os.Remove(filepath.Join(dir, brokerAddrFile))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if a, ok := readBrokerAddr(dir); ok && dialOK(ctx, a) {
			return cmd, a
		}
	}
	b, _ := os.ReadFile(dir + ".log")
	t.Fatalf("broker did not start:\n%s", b)
	return nil, ""
}

// TestBrokerPersistsAcrossSIGKILL produces with acks=all, commits a
// consumer-group offset, SIGKILLs the broker and restarts it on the same
// data dir: every acknowledged message and the committed offset survive,
// and auto-created topics get the configured default of 4 partitions.
func TestBrokerPersistsAcrossSIGKILL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "kafka")
	cmd, addr := startHelperBroker(t, dir)

	const topic, group, total, committed = "persist.v1", "persist-group", 200, 120
	type kv struct{ key, value string }
	msgs := make([]kv, total)
	recs := make([]*kgo.Record, total)
	for i := range msgs {
		msgs[i] = kv{fmt.Sprintf("k%03d", i), fmt.Sprintf("v%03d", i)}
		recs[i] = &kgo.Record{Key: []byte(msgs[i].key), Value: []byte(msgs[i].value)}
	}
	w, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	md, err := kadm.NewClient(w).Metadata(ctx, topic)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	parts := md.Topics[topic].Partitions.Numbers()
	if len(parts) != 4 {
		t.Errorf("auto-created topic has %d partitions, want 4", len(parts))
	}

	seen := consumeGroup(ctx, t, addr, topic, group, committed, true)
	if len(seen) != committed {
		t.Fatalf("consumed %d before the crash, want %d", len(seen), committed)
	}

	// Crash.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = cmd.Process.Wait()

	_, addr = startHelperBroker(t, dir)

	// Every acknowledged message is still there.
	all := map[string]string{}
	r, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	for len(all) < total && rctx.Err() == nil {
		r.PollFetches(rctx).EachRecord(func(m *kgo.Record) { all[string(m.Key)] = string(m.Value) })
	}
	rcancel()
	r.Close()
	if len(all) != total {
		t.Fatalf("after SIGKILL and restart %d messages remain, want %d", len(all), total)
	}
	for _, m := range msgs {
		if all[m.key] != m.value {
			t.Fatalf("message %s = %q after restart, want %q", m.key, all[m.key], m.value)
		}
	}

	// The group resumes after its committed offsets: exactly the rest arrive.
	rest := consumeGroup(ctx, t, addr, topic, group, total-committed, false)
	for k := range rest {
		if seen[k] {
			t.Errorf("message %s was committed before the crash but delivered again", k)
		}
	}
	if len(rest)+len(seen) != total {
		t.Errorf("after restart the group got %d new messages, want %d", len(rest), total-committed)
	}
}

// consumeGroup fetches n messages as member of group, committing each
// (synchronously) when commit is set, then checks nothing more arrives
// within a second when commit is unset.
func consumeGroup(ctx context.Context, t *testing.T, addr, topic, group string, n int, commit bool) map[string]bool {
	t.Helper()
	r, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.SessionTimeout(6*time.Second), kgo.RebalanceTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seen := map[string]bool{}
	for len(seen) < n {
		fs := r.PollRecords(ctx, 1)
		if err := ctx.Err(); err != nil {
			t.Fatalf("fetch (%d of %d): %v", len(seen), n, err)
		}
		for _, m := range fs.Records() {
			seen[string(m.Key)] = true
			if commit {
				if err := r.CommitRecords(ctx, m); err != nil {
					t.Fatalf("commit: %v", err)
				}
			}
		}
	}
	if !commit {
		c2, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		for c2.Err() == nil {
			for _, m := range r.PollRecords(c2, 1).Records() {
				t.Errorf("unexpected extra message %s after the committed range", m.Key)
			}
		}
	}
	return seen
}

// TestEnsureBrokerStartsAndReuses checks Ensure: it starts a broker in
// its own process group when none runs, a second call reuses it (with a
// no-op stop), and stop terminates it gracefully.
func TestEnsureBrokerStartsAndReuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	orig := brokerCommand
	brokerCommand = func(dir, listen string) (*exec.Cmd, error) { return helperBrokerCmd(dir, listen), nil }
	defer func() { brokerCommand = orig }()

	data := t.TempDir()
	addr, stop, err := Ensure(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	pidB, err := os.ReadFile(filepath.Join(data, "kafka", brokerPIDFile))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(strings.TrimSpace(string(pidB)), &pid)
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid == syscall.Getpgrp() {
		t.Errorf("broker pgid = %d (err %v), want its own group, not ours (%d)", pgid, err, syscall.Getpgrp())
	}

	addr2, stop2, err := Ensure(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	if addr2 != addr {
		t.Errorf("second Ensure = %s, want the running %s", addr2, addr)
	}
	stop2()
	if !dialOK(ctx, addr) {
		t.Fatal("the reuse's stop stopped the broker")
	}

	stop()
	if dialOK(ctx, addr) {
		t.Fatal("broker still answers after stop")
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatal("broker process still alive after stop")
	}
	if _, err := os.Stat(filepath.Join(data, "kafka", brokerAddrFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("broker.addr left behind after a graceful stop: %v", err)
	}
}

// TestBrokerRefusesSecondOnSameDataDir: two brokers on one log would corrupt it.
func TestBrokerRefusesSecondOnSameDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kafka")
	startHelperBroker(t, dir)
	out, err := helperBrokerCmd(dir, "127.0.0.1:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another broker is running") {
		t.Fatalf("second broker on the same dir: err=%v out=%s", err, out)
	}
}

// TestBrokerRejectsBadSettings: a setting the broker cannot use is an error
// naming it, not silently replaced by the default.
func TestBrokerRejectsBadSettings(t *testing.T) {
	for _, c := range []struct{ env, val, want string }{
		{"SENDSTREAM_BROKER_PROCS", "two", "SENDSTREAM_BROKER_PROCS"},
		{"SENDSTREAM_BROKER_PROCS", "0", "--procs"},
		{"SENDSTREAM_BROKER_GC_PERCENT", "5", "--gc-percent"},
		{"SENDSTREAM_BROKER_FSYNC", "yes", "SENDSTREAM_BROKER_FSYNC"},
	} {
		t.Run(c.env+"="+c.val, func(t *testing.T) {
			t.Setenv(c.env, c.val)
			err := Run([]string{"--data-dir", t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run with %s=%s: %v, want an error naming %s", c.env, c.val, err, c.want)
			}
		})
	}
}

// TestBrokerRequestsNoClientMetrics: like a stock Kafka broker without a
// metrics reporter, the broker subscribes a client to no KIP-714 metrics
// (kfake's default is all of them every 30 s), and assigns an instance id
// to a client that sent none.
func TestBrokerRequestsNoClientMetrics(t *testing.T) {
	_, addr := startHelperBroker(t, t.TempDir())
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatal(err)
	}
	if len(resp.RequestedMetrics) != 0 {
		t.Errorf("requested metrics %q, want none", resp.RequestedMetrics)
	}
	if resp.ClientInstanceID == [16]byte{} {
		t.Error("no client instance id assigned")
	}
	if resp.PushIntervalMillis < 60000 {
		t.Errorf("push interval %d ms: a client would ask again that often", resp.PushIntervalMillis)
	}
}
