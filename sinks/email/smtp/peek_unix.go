//go:build unix

package smtp

import (
	"net"
	"syscall"
)

// peerClosed reports whether the relay closed nc (a TCP connection), or
// sent something not yet read, without waiting: a one-byte MSG_PEEK that
// finds nothing to read means the connection is open and quiet.
func peerClosed(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var b [1]byte
	var perr error
	if err := rc.Read(func(fd uintptr) bool {
		_, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		return true
	}
	// EAGAIN: nothing to read. Otherwise a byte (n = 1), the end of the
	// stream (n = 0) or a reset.
	return perr != syscall.EAGAIN && perr != syscall.EWOULDBLOCK
}
