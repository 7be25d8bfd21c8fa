// Package broker is the embedded Kafka-protocol broker of the local stack:
// kfake persisted under a data directory, run as a process of its own
// (`sendstream broker`, started by deploy/stack.sh, or by `sendstream serve`
// through Ensure when no brokers are configured), so that a killed server
// never takes acknowledged records with it.
package broker

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sendstream/deploy/profiling"
	"sendstream/pipeline"
)

// Files a broker keeps in its data directory.
const (
	brokerAddrFile   = "broker.addr"    // host:port it listens on, written once it listens
	brokerPIDFile    = "broker.pid"     // its process id
	brokerRunLock    = "broker.lock"    // held (flock) for the broker's whole life
	brokerEnsureLock = "ensure.lock"    // serialises Ensure callers
	brokerLogFile    = "broker.log"     // stdout/stderr of a broker started by Ensure
	brokerPortsFile  = "../ports/kafka" // port remembered by deploy/stack.sh, reused when free
)

// Run runs the local Kafka-protocol broker (kfake) until SIGINT or SIGTERM:
// `sendstream broker --data-dir DIR --listen HOST:PORT --partitions N`
// passes its arguments here.
// Every produced batch is written to its segment file (the page cache)
// before it is acknowledged, so killing any process, the broker included,
// loses nothing acknowledged; like Kafka's default, batches are not fsynced
// unless --fsync is given (then they survive a machine crash too, at about
// a third of the throughput). Without it their writeback is started every
// --write-behind interval (runWriteBehind), so dirty pages never pile up.
// Topics are created on first use with N partitions, and all state
// (records, topics, committed group offsets) is reloaded from DIR on the
// next start.
func Run(args []string) error {
	envProcs, err := envInt("SENDSTREAM_BROKER_PROCS", 1)
	if err != nil {
		return err
	}
	envGC, err := envInt("SENDSTREAM_BROKER_GC_PERCENT", 400)
	if err != nil {
		return err
	}
	envFsync, err := envBool("SENDSTREAM_BROKER_FSYNC")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	dataDir := fs.String("data-dir", ".run/kafka", "directory holding the broker's persistent state")
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (port 0 picks a free port)")
	partitions := fs.Int("partitions", 4, "partitions of auto-created topics")
	logLevel := fs.String("log-level", "warn", "kfake log level: none, error, warn, info, debug")
	procs := fs.Int("procs", envProcs, "GOMAXPROCS of the broker (default $SENDSTREAM_BROKER_PROCS or 1: kfake handles requests on one goroutine, and more threads only spin)")
	gcPercent := fs.Int("gc-percent", envGC, "Go GC target of the broker, as GOGC (default $SENDSTREAM_BROKER_GC_PERCENT or 400: kfake keeps the log in memory, and at 100 re-marking it took a third of the broker's CPU)")
	fsync := fs.Bool("fsync", envFsync, "fsync every produced batch before acknowledging it (default $SENDSTREAM_BROKER_FSYNC=1)")
	behind := fs.Duration("write-behind", 250*time.Millisecond, "without --fsync, start writing appended log data to disk this often, without waiting for it, so the kernel never flushes a long backlog at once and stalls other processes' fsyncs (0: leave it to the kernel)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *procs < 1 {
		return fmt.Errorf("broker: --procs must be at least 1, got %d", *procs)
	}
	if *gcPercent < 10 {
		return fmt.Errorf("broker: --gc-percent must be at least 10, got %d", *gcPercent)
	}
	runtime.GOMAXPROCS(*procs)
	debug.SetGCPercent(*gcPercent)
	if *partitions < 1 {
		return fmt.Errorf("broker: --partitions must be at least 1, got %d", *partitions)
	}
	host, portStr, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("broker: bad --listen %q: %w", *listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("broker: bad --listen port %q: %w", portStr, err)
	}
	level, err := parseKfakeLevel(*logLevel)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(*dataDir)
	if err != nil {
		return fmt.Errorf("broker: data dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("broker: create data dir: %w", err)
	}

	// One broker per data directory: a second one would corrupt the log.
	lock, err := os.OpenFile(filepath.Join(dir, brokerRunLock), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("broker: open lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("broker: another broker is running on %s: %w", dir, err)
	}

	_ = os.Remove(filepath.Join(dir, brokerAddrFile))
	if err := writeFileAtomic(filepath.Join(dir, brokerPIDFile), strconv.Itoa(os.Getpid())+"\n"); err != nil {
		return fmt.Errorf("broker: %w", err)
	}

	if addr := os.Getenv("SENDSTREAM_BROKER_DEBUG_ADDR"); addr != "" {
		go profiling.Serve(addr, slog.Default())
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	opts := []kfake.Opt{
		kfake.DataDir(filepath.Join(dir, "data")),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*partitions),
		kfake.Ports(port), // exactly one broker
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
		}),
		kfake.ClusterID("sendstream-local"),
		// Any envelope the producer may send (pipeline.MaxEnvelopeBytes),
		// also on topics created before topics carried their own setting.
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(pipeline.BrokerMessageMaxBytes)}),
		kfake.WithLogger(kfake.BasicLogger(os.Stderr, level)),
	}
	if *fsync {
		opts = append(opts, kfake.SyncWrites())
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("broker: start kfake: %w", err)
	}
	persistAutoCreatedTopics(cluster)
	requestNoClientMetrics(cluster)
	addrs := cluster.ListenAddrs()
	if len(addrs) != 1 {
		cluster.Close()
		return fmt.Errorf("broker: expected one listener, got %v", addrs)
	}
	if err := writeFileAtomic(filepath.Join(dir, brokerAddrFile), addrs[0]+"\n"); err != nil {
		cluster.Close()
		return fmt.Errorf("broker: %w", err)
	}
	fmt.Fprintf(os.Stderr, "broker: listening on %s, data in %s\n", addrs[0], dir)
	if !*fsync && *behind > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go runWriteBehind(ctx, filepath.Join(dir, "data"), *behind)
	}

	<-sigs
	// Close persists group and producer state and closes the segment files.
	_ = os.Remove(filepath.Join(dir, brokerAddrFile))
	cluster.Close()
	_ = os.Remove(filepath.Join(dir, brokerPIDFile))
	return nil
}

// persistAutoCreatedTopics makes topic auto-creation durable. kfake creates
// a topic that a metadata request asks for without writing topics.json (it
// is saved only on a clean Close), so after a crash the topic, and with it
// every record and committed offset in it, would be gone. This hook creates
// such topics through Cluster.CreateTopic, which persists at once, before
// kfake answers the request.
func persistAutoCreatedTopics(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mr, ok := req.(*kmsg.MetadataRequest)
		if !ok || !mr.AllowAutoTopicCreation {
			return nil, nil, false
		}
		for _, t := range mr.Topics {
			if t.Topic == nil || *t.Topic == "" {
				continue
			}
			// Fails with TOPIC_ALREADY_EXISTS for known topics, at the cost
			// of one trip through the cluster loop: metadata requests are rare.
			_ = c.CreateTopic(*t.Topic, -1, nil)
		}
		return nil, nil, false
	})
}

// requestNoClientMetrics answers every client's KIP-714 subscription
// request with no metrics, as a stock Kafka broker without a metrics
// reporter plugin does. kfake subscribes every client to all its metrics,
// pushed every 30 s: with a process's two dozen clients that was a steady
// stream of gzip-compressed pushes through the broker's one request loop
// for metrics nobody reads (the processes export theirs over Prometheus).
func requestNoClientMetrics(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.GetTelemetrySubscriptions), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r, ok := req.(*kmsg.GetTelemetrySubscriptionsRequest)
		if !ok {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
		resp.Version = r.Version
		resp.ClientInstanceID = r.ClientInstanceID
		if resp.ClientInstanceID == [16]byte{} {
			resp.ClientInstanceID = newInstanceID()
		}
		resp.SubscriptionID = 0
		resp.PushIntervalMillis = 300000
		return resp, nil, true
	})
}

// newInstanceID is a random client instance id (KIP-714: the broker
// assigns one to a client that sent none).
func newInstanceID() (id [16]byte) {
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	return id
}

func parseKfakeLevel(s string) (kfake.LogLevel, error) {
	switch strings.ToLower(s) {
	case "none":
		return kfake.LogLevelNone, nil
	case "error":
		return kfake.LogLevelError, nil
	case "warn":
		return kfake.LogLevelWarn, nil
	case "info":
		return kfake.LogLevelInfo, nil
	case "debug":
		return kfake.LogLevelDebug, nil
	}
	return 0, fmt.Errorf("broker: unknown --log-level %q", s)
}

func writeFileAtomic(path, content string) error {
	tmp := fmt.Sprintf("%s.tmp.%d", path, os.Getpid())
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return nil
}

// envInt reads a whole number from the environment variable name, def when
// it is unset or empty.
func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a whole number", name, v)
	}
	return n, nil
}

// envBool reads 1 (true) or 0 (false) from the environment variable name;
// unset or empty is false.
func envBool(name string) (bool, error) {
	switch v := os.Getenv(name); v {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, fmt.Errorf("%s %q: want 1 or 0", name, v)
	}
}
