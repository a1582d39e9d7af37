//go:build unix

package main

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// shmDMSOffset is the byte of the -shm file every connection to the file
// holds a read lock on while it has the file open (SQLite's unix VFS:
// UNIX_SHM_DMS).
const shmDMSOffset = 128

// unusedWAL reports whether path's -wal file is a regular file and no
// process has path open: no lock on the -shm file's deadman-switch byte
// (or no -shm file). Every commit is then in the file and its -wal. A
// writer that crashed leaves a -wal so, and an Open that failed (on a full
// disk, say) an empty one. The -shm is opened to read and closed: this
// process holds no lock on it.
func unusedWAL(path string) bool {
	fi, err := os.Lstat(path + "-wal")
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	shm, err := os.Open(path + "-shm")
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	defer shm.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: shmDMSOffset, Len: 1}
	if err := unix.FcntlFlock(shm.Fd(), unix.F_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type == unix.F_UNLCK
}
