package pipeline

import (
	"hash/fnv"
	"testing"
)

// TestPartitionForIsFNV1a: the partition of a key must not change across
// releases (keys already on the topics keep their order), so the inline
// hash must stay 32-bit FNV-1a exactly.
func TestPartitionForIsFNV1a(t *testing.T) {
	for _, key := range []string{"", "a", "w1:c1", "01a20150c05507dc7b35742795ea3a47:01a20151c1deb5cae77c34403f677b5e", "é\x00\xff"} {
		h := fnv.New32a()
		h.Write([]byte(key))
		for _, n := range []int{2, 3, 12, 64} {
			if got, want := partitionFor([]byte(key), n), int(h.Sum32()%uint32(n)); got != want {
				t.Errorf("partitionFor(%q, %d) = %d, want %d", key, n, got, want)
			}
		}
	}
	if partitionFor([]byte("x"), 1) != 0 {
		t.Error("one partition: want 0")
	}
}
