//go:build !unix

package redisstate

import "syscall"

// peerClosed looks at no socket off unix: a command on a connection the
// server closed fails after it was written, as go-redis alone would have it.
func peerClosed(syscall.Conn) error { return nil }
