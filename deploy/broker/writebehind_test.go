package broker

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWriteBehindStartsWritebackOfFilesThatChanged checks a pass hands over
// new and grown files once each, leaves unchanged ones alone and forgets
// removed ones.
func TestWriteBehindStartsWritebackOfFilesThatChanged(t *testing.T) {
	dir := t.TempDir()
	seg := filepath.Join(dir, "topic-0", "00000000.log")
	idx := filepath.Join(dir, "topic-0", "00000000.idx")
	if err := os.MkdirAll(filepath.Dir(seg), 0o755); err != nil {
		t.Fatal(err)
	}
	appendTo := func(path, s string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	var started []string
	w := writeBehind{start: func(path string) error {
		started = append(started, path)
		return nil
	}}
	pass := func(want ...string) {
		t.Helper()
		started = nil
		w.pass(dir)
		slices.Sort(started)
		slices.Sort(want)
		if !slices.Equal(started, want) {
			t.Fatalf("writeback started for %v, want %v", started, want)
		}
	}

	appendTo(seg, "batch 1")
	appendTo(idx, "i")
	pass(seg, idx)
	pass() // nothing changed
	appendTo(seg, "batch 2")
	pass(seg)
	if err := os.Remove(idx); err != nil {
		t.Fatal(err)
	}
	pass()
	if _, ok := w.sizes[idx]; ok {
		t.Fatalf("removed file %s still remembered", idx)
	}
	appendTo(idx, "i") // recreated at the size it had: new again
	pass(idx)
}

// TestWriteBehindRetriesAFileWhoseWritebackFailed checks a file is handed
// over again on the next pass when starting its writeback failed.
func TestWriteBehindRetriesAFileWhoseWritebackFailed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "seg.log")
	if err := os.WriteFile(path, []byte("batch"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := 0
	w := writeBehind{start: func(string) error {
		calls++
		if calls == 1 {
			return os.ErrPermission
		}
		return nil
	}}
	w.pass(dir)
	w.pass(dir)
	w.pass(dir)
	if calls != 2 {
		t.Fatalf("writeback started %d times over three passes, want 2 (failed, then retried once)", calls)
	}
}

// TestStartWritebackOnARealFile checks the kernel accepts the request on a
// file opened read-only, as the broker's segment files are reopened.
func TestStartWritebackOnARealFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg.log")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := startWriteback(path); err != nil {
		t.Fatalf("startWriteback: %v", err)
	}
	if err := startWriteback(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("startWriteback of a missing file: no error")
	}
}
