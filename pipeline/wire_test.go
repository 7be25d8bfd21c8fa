package pipeline

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAppendBatchDecodes decodes a batch written by appendBatch with
// franz-go's generated decoder (an implementation independent of ours)
// and checks every field a broker and a consumer read.
func TestAppendBatchDecodes(t *testing.T) {
	batch := []queued{
		{key: []byte("ws1/c1"), value: []byte(`{"id":"a"}`), typ: "event.recorded.v1"},
		{key: nil, value: make([]byte, 300), typ: "x"}, // empty key; a value whose length takes two varint bytes
		{key: []byte("k"), value: []byte(`{}`), typ: "request.logged.v1"},
	}
	var c wireConn
	const ms = 1_700_000_000_123
	b, err := c.appendBatch(nil, batch, nil, ms)
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.BigEndian.Uint32(b); int(n) != len(b)-4 {
		t.Fatalf("records length %d, %d bytes follow", n, len(b)-4)
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b[4:]); err != nil {
		t.Fatalf("decode batch: %v", err)
	}
	if rb.Magic != 2 || rb.Attributes != 0 || rb.NumRecords != 3 || rb.LastOffsetDelta != 2 ||
		rb.FirstTimestamp != ms || rb.MaxTimestamp != ms || rb.ProducerID != -1 || rb.ProducerEpoch != -1 ||
		rb.FirstSequence != -1 || rb.PartitionLeaderEpoch != -1 {
		t.Fatalf("batch header %+v", rb)
	}
	if records, bound := len(b)-4-61, recordsSize(batch); records > bound {
		t.Fatalf("records of %d bytes, over recordsSize's bound %d", records, bound)
	}
	if int(rb.Length) != len(b)-4-12 {
		t.Fatalf("batch length %d, want %d", rb.Length, len(b)-4-12)
	}
	if want := crc32.Checksum(b[4+21:], crc32.MakeTable(crc32.Castagnoli)); uint32(rb.CRC) != want {
		t.Fatalf("crc %x, want %x", uint32(rb.CRC), want)
	}
	rest := rb.Records
	for i, m := range batch {
		var r kmsg.Record
		if err := r.ReadFrom(rest); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		rest = rest[varintLen(int64(r.Length))+int(r.Length):]
		if r.OffsetDelta != int32(i) || r.TimestampDelta64 != 0 || string(r.Key) != string(m.key) ||
			string(r.Value) != string(m.value) || len(r.Headers) != 1 ||
			r.Headers[0].Key != "type" || string(r.Headers[0].Value) != m.typ {
			t.Fatalf("record %d = %+v", i, r)
		}
		if r.Key == nil {
			t.Fatalf("record %d: null key, want an empty one", i)
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes after the last record", len(rest))
	}
}

// TestPublishEachCompression publishes concurrently with every codec and
// reads the envelopes back with kafka-go's reader: keys, values, type
// headers and record times arrive intact.
func TestPublishEachCompression(t *testing.T) {
	for _, comp := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			const topic = "t.comp"
			brokers := newCluster(t, topic)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p, err := NewProducer(ctx, ProducerConfig{Brokers: brokers, Compression: comp, Metrics: NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			const n = 200
			before := time.Now().Add(-time.Second)
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					if err := p.Publish(ctx, topic, testEnv(fmt.Sprintf("k%d", i%7), i)); err != nil {
						t.Error(err)
					}
				}(i)
			}
			wg.Wait()
			seen := map[string]bool{}
			for _, m := range consume(t, brokers, topic, n, 10*time.Second) {
				env := decode(t, m)
				if seen[env.ID] || string(m.Key) != env.Key || len(m.Headers) != 1 || string(m.Headers[0].Value) != env.Type {
					t.Fatalf("record %s/%d@%d: key %q headers %+v (seen before: %v)", m.Topic, m.Partition, m.Offset, m.Key, m.Headers, seen[env.ID])
				}
				if m.Time.Before(before) || m.Time.After(time.Now().Add(time.Second)) {
					t.Fatalf("record time %v", m.Time)
				}
				seen[env.ID] = true
			}
			if len(seen) != n {
				t.Fatalf("%d distinct envelopes, want %d", len(seen), n)
			}
		})
	}
}

// TestTrimDropsOnlyLargeBuffers: a connection keeps its usual buffers
// between requests and lets go of ones a rare large request grew.
func TestTrimDropsOnlyLargeBuffers(t *testing.T) {
	c := wireConn{req: make([]byte, 0, keepBufferBytes+1), res: make([]byte, 64<<10), scratch: make([]byte, 0, keepBufferBytes)}
	c.trim()
	if c.req != nil || cap(c.res) != 64<<10 || cap(c.scratch) != keepBufferBytes {
		t.Fatalf("after trim: req cap %d, res cap %d, scratch cap %d", cap(c.req), cap(c.res), cap(c.scratch))
	}
}
