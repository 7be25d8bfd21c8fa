package broker

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// runWriteBehind starts the writeback of what the broker appended under dir
// every interval, without waiting for it, until ctx ends.
//
// Without --fsync the broker acknowledges a batch once it is in the page
// cache. Left alone, the kernel writes such pages back only once they are
// 30 s old (vm.dirty_expire_centisecs), all at once: after a busy minute
// that was 500-900 MB in one burst, and every fsync on the machine (each
// Postgres commit among them) waited behind it for tens of milliseconds.
// Started every interval, the same bytes leave in small steps. Nothing waits
// for them: an acknowledgement means what it meant (in the page cache); the
// window a machine crash can lose only gets shorter.
func runWriteBehind(ctx context.Context, dir string, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	w := writeBehind{start: startWriteback}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.pass(dir)
		}
	}
}

// writeBehind remembers how large each file was when its writeback was last
// started, so a pass touches only files that grew (or shrank) since.
type writeBehind struct {
	sizes map[string]int64
	start func(path string) error // starts path's writeback without waiting
}

// pass starts the writeback of every regular file under dir whose size
// changed since the last pass, and forgets files that are gone.
func (w *writeBehind) pass(dir string) {
	if w.sizes == nil {
		w.sizes = map[string]int64{}
	}
	seen := make(map[string]bool, len(w.sizes))
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil // removed meanwhile (an old segment), or a directory
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		seen[path] = true
		if size, ok := w.sizes[path]; (!ok || size != info.Size()) && w.start(path) == nil {
			w.sizes[path] = info.Size()
		}
		return nil
	})
	for path := range w.sizes {
		if !seen[path] {
			delete(w.sizes, path)
		}
	}
}

// startWriteback asks the kernel to start writing path's dirty pages back.
func startWriteback(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return flushBehind(f)
}
