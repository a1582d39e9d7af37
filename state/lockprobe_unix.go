//go:build unix

package state

import (
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockProbe asks the file system holding f, the file at path, whether it
// takes POSIX locks, with F_GETLK, which tests a lock without taking or
// dropping one (so the locks this process's connections hold stay). It
// returns the failed call (an *fs.PathError) when the file system refuses
// locks: ENOLCK, which a network file system without its lock service
// returns and SQLite reports as SQLITE_BUSY, as if another process held
// the file; ENOSYS or EOPNOTSUPP. Any other outcome is nil: SQLite finds
// it on its own.
func lockProbe(f *os.File, path string) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk)
	if errno, ok := err.(syscall.Errno); ok && locksRefusedErrno(errno) {
		return &fs.PathError{Op: "fcntl", Path: path, Err: errno}
	}
	return nil
}

// locksRefusedErrno reports whether errno, from a lock call, says the file
// system takes no POSIX locks.
func locksRefusedErrno(errno syscall.Errno) bool {
	return errno == syscall.ENOLCK || errno == syscall.ENOSYS || errno == syscall.EOPNOTSUPP
}

// mapRefused reports whether errno, from mmap of the -shm file, says the
// file system does not map files shared (a network or FUSE file system),
// rather than that the process ran out of memory or address space.
func mapRefused(errno syscall.Errno) bool {
	switch errno {
	case syscall.ENODEV, syscall.EINVAL, syscall.ENOSYS, syscall.EOPNOTSUPP, syscall.EACCES:
		return true
	}
	return false
}
