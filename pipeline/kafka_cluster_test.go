package pipeline

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/schemas"
)

// securedCluster is a three-broker in-process cluster that speaks only TLS
// (with client certificates) and SASL SCRAM-SHA-512, and the KafkaSecurity
// that reaches it.
type securedCluster struct {
	c       *kfake.Cluster
	brokers []string
	sec     KafkaSecurity
}

// newSecuredCluster starts it with the given topics (6 partitions each)
// behind a throwaway CA written to a temporary directory.
func newSecuredCluster(t *testing.T, topics ...string) securedCluster {
	t.Helper()
	dir := t.TempDir()
	ca, caKey := newCert(t, nil, nil, "test CA", true)
	srv, srvKey := newCert(t, ca, caKey, "127.0.0.1", false)
	cli, cliKey := newCert(t, ca, caKey, "sendstream client", false)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Raw)
	writePEM(t, filepath.Join(dir, "client.pem"), "CERTIFICATE", cli.Raw)
	writeKey(t, filepath.Join(dir, "client-key.pem"), cliKey)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	tc := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{srv.Raw}, PrivateKey: srvKey}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}
	c, err := kfake.NewCluster(
		kfake.NumBrokers(3),
		kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "sendstream", "s3cret-pw"),
		kfake.TLS(tc),
		kfake.SeedTopics(6, topics...),
		kfake.GroupMinSessionTimeout(500*time.Millisecond),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(BrokerMessageMaxBytes)}),
	)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return securedCluster{c: c, brokers: c.ListenAddrs(), sec: KafkaSecurity{
		CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client-key.pem"),
		SASLMechanism: "SCRAM-SHA-512", SASLUsername: "sendstream", SASLPassword: "s3cret-pw",
	}}
}

// newCert makes a certificate signed by parent (self-signed when nil).
func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = nil
	} else {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	signer, signKey := parent, parentKey
	if parent == nil {
		signer, signKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeKey(t *testing.T, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, path, "EC PRIVATE KEY", der)
}

// TestSecuredClusterRefusesPlaintextAndWrongPassword: the cluster of the
// test below is really secured: a client without TLS and SASL, or with a
// wrong password, does not get a producer.
func TestSecuredClusterRefusesPlaintextAndWrongPassword(t *testing.T) {
	sc := newSecuredCluster(t, "t.refuse")
	for name, sec := range map[string]KafkaSecurity{
		"plaintext":      {},
		"wrong password": func() KafkaSecurity { s := sc.sec; s.SASLPassword = "nope"; return s }(),
		"no client cert": func() KafkaSecurity { s := sc.sec; s.CertFile, s.KeyFile = "", ""; return s }(),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		p, err := NewProducer(ctx, ProducerConfig{Brokers: sc.brokers, Security: sec, Metrics: prometheus.NewRegistry()})
		cancel()
		if err == nil {
			p.Close()
			t.Fatalf("%s: NewProducer reached the secured cluster", name)
		}
	}
}

// TestProduceConsumeTLSSCRAMWhileLeadersMove: a three-broker cluster with
// TLS (client certificates) and SASL SCRAM-SHA-512; topic created through
// the producer's admin API; 8 publishers produce under load while a mover
// moves partition leaders between brokers every 20 ms and a consumer with
// the same KafkaSecurity reads the topic. Every envelope whose Publish
// returned nil is consumed; duplicates are counted by envelope id (the
// stages' dedup key) and each key's envelopes first appear in publish order.
func TestProduceConsumeTLSSCRAMWhileLeadersMove(t *testing.T) {
	const topic, parts = "cluster", 6
	sc := newSecuredCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := NewProducer(ctx, ProducerConfig{Brokers: sc.brokers, TopicPrefix: "sec.", Security: sc.sec, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	defer p.Close()
	if err := p.EnsureTopics(ctx, []string{topic}, parts); err != nil {
		t.Fatalf("EnsureTopics over TLS and SASL: %v", err)
	}

	// The consumer: direct partition consumption from the start.
	opts, err := sc.sec.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(append(opts, kgo.SeedBrokers(sc.brokers...), kgo.ConsumeTopics("sec."+topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	type seen struct {
		mu    sync.Mutex
		count map[string]int   // envelope id -> times consumed
		first map[string][]int // key -> publish index of each first appearance
	}
	got := &seen{count: map[string]int{}, first: map[string][]int{}}
	consDone := make(chan struct{})
	consCtx, stopCons := context.WithCancel(ctx)
	go func() {
		defer close(consDone)
		for consCtx.Err() == nil {
			fs := cons.PollFetches(consCtx)
			fs.EachError(func(tp string, pt int32, err error) {
				if consCtx.Err() == nil {
					t.Logf("fetch %s/%d: %v", tp, pt, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				var env schemas.Envelope
				if err := json.Unmarshal(r.Value, &env); err != nil {
					t.Errorf("decode %s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
					return
				}
				got.mu.Lock()
				got.count[env.ID]++
				if got.count[env.ID] == 1 {
					var i int
					fmt.Sscanf(env.ID[len(env.Key)+1:], "%d", &i)
					got.first[env.Key] = append(got.first[env.Key], i)
				}
				got.mu.Unlock()
			})
		}
	}()

	// The mover.
	moverCtx, stopMover := context.WithCancel(ctx)
	moves := 0
	moverDone := make(chan struct{})
	go func() {
		defer close(moverDone)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-moverCtx.Done():
				return
			case <-tick.C:
			}
			pt := int32(i % parts)
			to := (sc.c.LeaderFor("sec."+topic, pt) + 1) % 3
			if err := sc.c.MoveTopicPartition("sec."+topic, pt, to); err != nil {
				t.Errorf("move %d to %d: %v", pt, to, err)
				return
			}
			moves++
		}
	}()

	// The publishers: keys p<w>k<j>, sequential Publishes of 1 to 3
	// envelopes each.
	const publishers, perPublisher = 8, 600
	var wg sync.WaitGroup
	var ackedMu sync.Mutex
	var acked []string
	errs := make(chan error, publishers)
	start := time.Now()
	for w := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := map[string]int{}
			for i := range perPublisher {
				n := 1 + i%3
				envs := make([]schemas.Envelope, n)
				for j := range envs {
					key := fmt.Sprintf("p%dk%d", w, (i+j)%5)
					envs[j] = testEnv(key, seq[key])
					seq[key]++
				}
				if err := p.Publish(ctx, topic, envs...); err != nil {
					errs <- fmt.Errorf("publisher %d, publish %d: %w", w, i, err)
					return
				}
				ackedMu.Lock()
				for _, e := range envs {
					acked = append(acked, e.ID)
				}
				ackedMu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopMover()
	<-moverDone
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if moves < 5 {
		t.Fatalf("only %d leader moves during the load", moves)
	}

	// Nothing acknowledged is lost.
	deadline := time.Now().Add(60 * time.Second)
	for {
		got.mu.Lock()
		missing := 0
		for _, id := range acked {
			if got.count[id] == 0 {
				missing++
			}
		}
		got.mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged envelopes never consumed", missing, len(acked))
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopCons()
	<-consDone

	got.mu.Lock()
	defer got.mu.Unlock()
	dups := 0
	for _, n := range got.count {
		dups += n - 1
	}
	for key, idx := range got.first {
		for i := 1; i < len(idx); i++ {
			if idx[i] <= idx[i-1] {
				t.Fatalf("key %s: envelope %d first seen after %d", key, idx[i], idx[i-1])
			}
		}
	}
	if m := counterValue(p.m.messages); m != uint64(len(acked)) {
		t.Fatalf("messages metric %d, acked %d", m, len(acked))
	}
	t.Logf("%d envelopes acked in %v with %d leader moves; %d consumed records, %d duplicates by envelope id, %d produce requests",
		len(acked), elapsed.Round(time.Millisecond), moves, len(acked)+dups, dups, counterValue(p.m.batches))
}

// TestRunConsumesOverTLSSCRAM: the stage runner's consumers take
// RunConfig.Security: a stage reads every envelope from the secured
// three-broker cluster, publishes its outputs there, and the runner stops
// cleanly; without Security the consumers never reach it.
func TestRunConsumesOverTLSSCRAM(t *testing.T) {
	sc := newSecuredCluster(t, tPrefix+tIn, tPrefix+tOut, tPrefix+schemas.TopicDeadLetter)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := NewProducer(ctx, ProducerConfig{Brokers: sc.brokers, TopicPrefix: tPrefix, Security: sc.sec, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	plain := newRecorder()
	cfg := testRunConfig(sc.brokers, p, registered("sec-plain", plain))
	stopPlain := startRun(t, cfg)

	st := newRecorder()
	st.output = true
	cfg = testRunConfig(sc.brokers, p, registered("sec-copy", st, tOut))
	cfg.Security = sc.sec
	stop := startRun(t, cfg)
	envs := publishN(t, p, tIn, 200)
	waitFor(t, "every envelope handled over TLS and SCRAM", 30*time.Second, func() bool {
		for _, e := range envs {
			if st.times(e.ID) == 0 {
				return false
			}
		}
		return true
	})
	if err := stop(); err != nil {
		t.Fatalf("Run over TLS and SCRAM: %v", err)
	}
	if n := plain.count(); n != 0 {
		t.Fatalf("a runner without Security handled %d envelopes of the secured cluster", n)
	}
	_ = stopPlain()

	// The outputs went to the secured cluster too.
	opts, err := sc.sec.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(sc.brokers...), kgo.ConsumeTopics(tPrefix+tOut),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	outs := 0
	for outs < len(envs) && ctx.Err() == nil {
		outs += cl.PollFetches(ctx).NumRecords()
	}
	if outs < len(envs) {
		t.Fatalf("%d outputs of %d in the secured cluster", outs, len(envs))
	}
}
