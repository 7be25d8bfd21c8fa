package clickhouse

import (
	"hash/maphash"
	"reflect"
	"testing"
)

// TestBufferHashCollision: two ids with one 64-bit hash (forced here) stay
// two rows, and each is still found for Put and Add.
func TestBufferHashCollision(t *testing.T) {
	var b Buffer[int]
	b.Put("a", 1)
	b.seen[maphash.String(b.seed, "b")] = 0 // "b" now hashes to a's slot
	if !b.Put("b", 2) {
		t.Fatal("Put(b) took b for a")
	}
	if b.Put("b", 3) || b.Add("b", 4) || b.Put("a", 5) {
		t.Fatal("a colliding id was not found again")
	}
	if got, want := b.Rows(), []int{5, 3}; !reflect.DeepEqual(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}
