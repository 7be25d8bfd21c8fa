package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The producer speaks the Kafka wire protocol itself: it writes produce
// requests, with their record batches (magic 2), straight into one reused
// buffer per connection, and decodes the answers with kmsg's generated
// code. kafka-go's encoder, which this replaces, goes through reflection
// and page buffers and cost more CPU than the rest of the flush.

const (
	apiProduce     = 0
	apiAPIVersions = 18
	// Produce versions 3 to 8 carry magic-2 record batches without the
	// flexible (tagged-field) encoding; every broker since Kafka 0.11
	// accepts them.
	minProduceVersion = 3
	maxProduceVersion = 8
	// maxResponseBytes bounds an answer's size field: anything larger is a
	// broken stream, not a produce response.
	maxResponseBytes = 64 << 20
	// keepBufferBytes bounds the buffers a connection keeps between
	// requests: a rare large request (up to MaxRequestBytes) does not pin
	// its buffers for the connection's life.
	keepBufferBytes = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// wireConn is one connection to a broker, used by one flusher goroutine at
// a time: a request is written and its answer read before the next.
type wireConn struct {
	nc       net.Conn
	r        *bufio.Reader
	clientID string
	version  int16 // of produce requests, negotiated at dial
	corr     int32 // correlation id of the last request
	req      []byte
	res      []byte
	scratch  []byte // a compressed batch's records before compression
}

// dialWire connects to addr and negotiates the produce version.
func dialWire(ctx context.Context, addr, clientID string) (*wireConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &wireConn{nc: nc, r: bufio.NewReaderSize(nc, 16<<10), clientID: clientID}
	if err := c.negotiate(); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// negotiate asks for the broker's API versions (request version 0, which
// every broker answers) and picks the highest produce version both sides
// speak.
func (c *wireConn) negotiate() error {
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	body, err := c.roundTrip(c.appendHeader(c.req[:0], apiAPIVersions, 0))
	if err != nil {
		return fmt.Errorf("api versions: %w", err)
	}
	res := kmsg.ApiVersionsResponse{Version: 0}
	if err := res.ReadFrom(body); err != nil {
		return fmt.Errorf("api versions: decode: %w", err)
	}
	if res.ErrorCode != 0 {
		return fmt.Errorf("api versions: %w", kafka.Error(res.ErrorCode))
	}
	for _, k := range res.ApiKeys {
		if k.ApiKey != apiProduce {
			continue
		}
		v := min(k.MaxVersion, maxProduceVersion)
		if v < minProduceVersion || v < k.MinVersion {
			return fmt.Errorf("broker speaks produce versions %d to %d, the producer %d to %d",
				k.MinVersion, k.MaxVersion, minProduceVersion, maxProduceVersion)
		}
		c.version = v
		return nil
	}
	return errors.New("api versions: the broker lists no produce API")
}

// Close closes the connection.
func (c *wireConn) Close() error { return c.nc.Close() }

// appendHeader starts a request in b: a size placeholder (filled in by
// roundTrip) and request header version 1.
func (c *wireConn) appendHeader(b []byte, api, version int16) []byte {
	c.corr++
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(api))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(c.corr))
	return appendString(b, c.clientID)
}

// roundTrip fills in req's size, writes it, and returns the body of the
// answer (after the correlation id), valid until the next roundTrip.
func (c *wireConn) roundTrip(req []byte) ([]byte, error) {
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	c.req = req
	if _, err := c.nc.Write(req); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > maxResponseBytes {
		return nil, fmt.Errorf("answer of %d bytes", n)
	}
	if cap(c.res) < int(n) {
		c.res = make([]byte, n)
	}
	res := c.res[:n]
	if _, err := io.ReadFull(c.r, res); err != nil {
		return nil, err
	}
	if corr := int32(binary.BigEndian.Uint32(res)); corr != c.corr {
		return nil, fmt.Errorf("answer to request %d, want %d", corr, c.corr)
	}
	return res[4:], nil
}

// trim drops buffers grown past keepBufferBytes.
func (c *wireConn) trim() {
	for _, buf := range []*[]byte{&c.req, &c.res, &c.scratch} {
		if cap(*buf) > keepBufferBytes {
			*buf = nil
		}
	}
}

// producePart is one partition's records in a produce request.
type producePart struct {
	topic     string
	partition int32
	batch     []queued
}

// produce sends one acks=all produce request of parts, which must be
// sorted by topic, and returns the decoded answer.
func (c *wireConn) produce(parts []producePart, codec compress.Codec, timeout time.Duration, now time.Time) (*kmsg.ProduceResponse, error) {
	// One allocation for the whole request when the kept buffer is too
	// small, instead of doubling (and copying) through the records.
	b := c.appendHeader(slices.Grow(c.req[:0], requestSize(parts)), apiProduce, c.version)
	b = binary.BigEndian.AppendUint16(b, 0xffff) // transactional id: null
	b = binary.BigEndian.AppendUint16(b, 0xffff) // acks: -1, all in-sync replicas
	b = binary.BigEndian.AppendUint32(b, uint32(timeout/time.Millisecond))
	topicsAt, topics := len(b), 0
	b = append(b, 0, 0, 0, 0) // topic count, set below
	ms := now.UnixMilli()
	for i := 0; i < len(parts); {
		j := i + 1
		for j < len(parts) && parts[j].topic == parts[i].topic {
			j++
		}
		b = appendString(b, parts[i].topic)
		b = binary.BigEndian.AppendUint32(b, uint32(j-i))
		for _, p := range parts[i:j] {
			b = binary.BigEndian.AppendUint32(b, uint32(p.partition))
			var err error
			if b, err = c.appendBatch(b, p.batch, codec, ms); err != nil {
				return nil, err
			}
		}
		i, topics = j, topics+1
	}
	binary.BigEndian.PutUint32(b[topicsAt:], uint32(topics))
	body, err := c.roundTrip(b)
	if err != nil {
		return nil, err
	}
	res := &kmsg.ProduceResponse{Version: c.version}
	err = res.ReadFrom(body)
	c.trim()
	if err != nil {
		return nil, fmt.Errorf("decode produce answer: %w", err)
	}
	return res, nil
}

// requestSize bounds the encoded size of a produce request of parts
// (uncompressed): the header, each topic and partition, each batch header
// and its records.
func requestSize(parts []producePart) int {
	n := 64
	for i := range parts {
		n += 2 + len(parts[i].topic) + 4 + 4 + 4 + 61 + recordsSize(parts[i].batch)
	}
	return n
}

// recordsSize bounds the encoded size of batch's records (appendRecords),
// each with its worst-case varints.
func recordsSize(batch []queued) int {
	n := 0
	for j := range batch {
		m := &batch[j]
		n += 5*6 + 3 + len(m.key) + len(m.value) + len(typeHeaderKey) + len(m.typ)
	}
	return n
}

// Offsets within a record batch (magic 2) of the fields filled in last.
const (
	batchLengthAt = 8  // after the base offset
	batchCRCAt    = 17 // after the batch length, leader epoch and magic
)

// appendBatch appends the produce request's records field for batch: its
// length and one record batch with every record stamped ms and carrying the
// envelope type in a "type" header; codec, when not nil, compresses the
// records.
func (c *wireConn) appendBatch(b []byte, batch []queued, codec compress.Codec, ms int64) ([]byte, error) {
	sizeAt := len(b)
	b = append(b, 0, 0, 0, 0)
	start := len(b)
	b = binary.BigEndian.AppendUint64(b, 0)          // base offset
	b = append(b, 0, 0, 0, 0)                        // batch length
	b = binary.BigEndian.AppendUint32(b, 0xffffffff) // partition leader epoch: -1
	b = append(b, 2)                                 // magic
	b = append(b, 0, 0, 0, 0)                        // crc
	var attrs uint16
	if codec != nil {
		attrs = uint16(codec.Code()) & 7
	}
	b = binary.BigEndian.AppendUint16(b, attrs)
	b = binary.BigEndian.AppendUint32(b, uint32(len(batch)-1)) // last offset delta
	b = binary.BigEndian.AppendUint64(b, uint64(ms))           // first timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(ms))           // max timestamp
	b = binary.BigEndian.AppendUint64(b, ^uint64(0))           // producer id: -1
	b = binary.BigEndian.AppendUint16(b, 0xffff)               // producer epoch: -1
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)           // base sequence: -1
	b = binary.BigEndian.AppendUint32(b, uint32(len(batch)))
	if codec == nil {
		b = appendRecords(b, batch)
	} else {
		c.scratch = appendRecords(slices.Grow(c.scratch[:0], recordsSize(batch)), batch)
		w := bytes.NewBuffer(b) // appends to b
		z := codec.NewWriter(w)
		if _, err := z.Write(c.scratch); err != nil {
			return nil, fmt.Errorf("compress records: %w", err)
		}
		if err := z.Close(); err != nil {
			return nil, fmt.Errorf("compress records: %w", err)
		}
		b = w.Bytes()
	}
	binary.BigEndian.PutUint32(b[start+batchLengthAt:], uint32(len(b)-start-12))
	binary.BigEndian.PutUint32(b[start+batchCRCAt:], crc32.Checksum(b[start+batchCRCAt+4:], castagnoli))
	binary.BigEndian.PutUint32(b[sizeAt:], uint32(len(b)-start))
	return b, nil
}

// typeHeaderKey is the name of the header that carries the envelope type.
const typeHeaderKey = "type"

// appendRecords appends batch as magic-2 records: timestamp delta 0, offset
// delta the index, the key and value (never null), one "type" header.
func appendRecords(b []byte, batch []queued) []byte {
	for j := range batch {
		m := &batch[j]
		size := 1 + 1 + varintLen(int64(j)) + // attributes, timestamp delta 0, offset delta
			varintLen(int64(len(m.key))) + len(m.key) +
			varintLen(int64(len(m.value))) + len(m.value) +
			1 + // header count 1
			varintLen(int64(len(typeHeaderKey))) + len(typeHeaderKey) +
			varintLen(int64(len(m.typ))) + len(m.typ)
		b = binary.AppendVarint(b, int64(size))
		b = append(b, 0, 0) // attributes, timestamp delta
		b = binary.AppendVarint(b, int64(j))
		b = binary.AppendVarint(b, int64(len(m.key)))
		b = append(b, m.key...)
		b = binary.AppendVarint(b, int64(len(m.value)))
		b = append(b, m.value...)
		b = append(b, 2) // one header (zigzag)
		b = binary.AppendVarint(b, int64(len(typeHeaderKey)))
		b = append(b, typeHeaderKey...)
		b = binary.AppendVarint(b, int64(len(m.typ)))
		b = append(b, m.typ...)
	}
	return b
}

// varintLen is the length of v as a zigzag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// appendString appends s as a Kafka string (int16 length).
func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}
