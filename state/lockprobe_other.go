//go:build !unix

package state

import (
	"os"
	"syscall"
)

// lockProbe returns nil: SQLite's locks are asked about on unix only.
func lockProbe(*os.File, string) error { return nil }

// mapRefused reports false: the -shm map is explained on unix only.
func mapRefused(syscall.Errno) bool { return false }

// locksRefusedErrno reports false: lock calls are explained on unix only.
func locksRefusedErrno(syscall.Errno) bool { return false }
