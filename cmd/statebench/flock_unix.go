//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// benchFlock is a blocking flock(2) on a file of its own: the kernel
// queues the waiters and wakes them when the holder unlocks (or dies).
type benchFlock struct{ f *os.File }

func openFlock(path string) (*benchFlock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	return &benchFlock{f: f}, nil
}

func (l *benchFlock) lock() error {
	for {
		err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

func (l *benchFlock) unlock() { _ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN) }

func (l *benchFlock) Close() error { return l.f.Close() }
