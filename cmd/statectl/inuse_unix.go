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

// unusedEmptyWAL reports whether path's -wal file is empty and no process
// has the file open: no lock on the -shm file's deadman-switch byte (or no
// -shm file). Such a -wal holds no commit: every one is in the file itself.
// An Open that failed (on a full disk, say) leaves an empty -wal behind.
// The -shm is opened to read and closed: this process holds no lock on it.
func unusedEmptyWAL(path string) bool {
	fi, err := os.Lstat(path + "-wal")
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
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
