//go:build unix

package redisstate

import (
	"errors"
	"io"
	"syscall"
)

// peerClosed returns why the socket's other end is gone (io.EOF for an end
// of file, or the error waiting on it, such as a reset), or nil when it
// may still be there: nothing to read, or data (a reply go-redis will
// read, or a push). It only peeks: nothing is consumed.
func peerClosed(sc syscall.Conn) error {
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var gone error
	_ = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n == 0 && err == nil:
			gone = io.EOF
		case err == nil, errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		default:
			gone = err
		}
		return true
	})
	return gone
}
