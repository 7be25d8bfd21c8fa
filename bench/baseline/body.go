package baseline

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
)

// EventBodyLen is the length of one event body: PERFORMANCE.md's ceilings
// were measured with a 216-byte JSON event.
const EventBodyLen = 216

// ImportRows is the number of events in one import body.
const ImportRows = 50

// RunToken is 8 hex characters random per process, put into every
// externalId and email so that bodies stay unique across harness runs
// against the same database.
var RunToken = newRunToken()

func newRunToken() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// AppendEvent appends the n-th event as a JSON object of exactly
// EventBodyLen bytes: a purchase goal of a per-n contact with a unique
// externalId. FROZEN: the baselines and the systems under test send the same
// bytes, so a change here changes every ratio.
func AppendEvent(dst []byte, n uint64) []byte {
	start := len(dst)
	dst = append(dst, `{"name":"purchase.completed","email":"u`...)
	dst = appendPadded(dst, n%1000000, 6)
	dst = append(dst, `@bench.example.com","goalType":"purchase","value":49.95,"currency":"USD","externalId":"o-`...)
	dst = append(dst, RunToken...)
	dst = append(dst, '-')
	dst = appendPadded(dst, n, 12)
	dst = append(dst, `","properties":{"plan":"pro","source":"bench","pad":"`...)
	for len(dst)-start < EventBodyLen-3 {
		dst = append(dst, 'x')
	}
	return append(dst, `"}}`...)
}

// AppendImport appends the n-th import body: {"events":[…]} with ImportRows
// events numbered n*ImportRows … n*ImportRows+ImportRows-1. FROZEN.
func AppendImport(dst []byte, n uint64) []byte {
	dst = append(dst, `{"events":[`...)
	for i := uint64(0); i < ImportRows; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendEvent(dst, n*ImportRows+i)
	}
	return append(dst, "]}"...)
}

// appendPadded appends n in decimal, zero-padded to width digits (more
// digits when n needs them).
func appendPadded(dst []byte, n uint64, width int) []byte {
	var buf [20]byte
	s := strconv.AppendUint(buf[:0], n, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}
