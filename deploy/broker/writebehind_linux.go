package broker

import (
	"os"

	"golang.org/x/sys/unix"
)

// flushBehind starts the writeback of f's dirty pages and returns at once
// (sync_file_range with SYNC_FILE_RANGE_WRITE only).
func flushBehind(f *os.File) error {
	return unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
