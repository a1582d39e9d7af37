//go:build unix

package state

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// errnoNames are the errno names a message shows beside their text.
var errnoNames = map[syscall.Errno]string{
	syscall.EACCES:       "EACCES",
	syscall.EPERM:        "EPERM",
	syscall.EROFS:        "EROFS",
	syscall.EMFILE:       "EMFILE",
	syscall.ENFILE:       "ENFILE",
	syscall.ENOSPC:       "ENOSPC",
	syscall.EDQUOT:       "EDQUOT",
	syscall.EFBIG:        "EFBIG",
	syscall.EIO:          "EIO",
	syscall.ENOENT:       "ENOENT",
	syscall.ENOTDIR:      "ENOTDIR",
	syscall.EISDIR:       "EISDIR",
	syscall.ELOOP:        "ELOOP",
	syscall.ENAMETOOLONG: "ENAMETOOLONG",
	syscall.ENOMEM:       "ENOMEM",
	syscall.EBUSY:        "EBUSY",
	syscall.ESTALE:       "ESTALE",
	syscall.ENODEV:       "ENODEV",
	syscall.ENXIO:        "ENXIO",
	syscall.ENOLCK:       "ENOLCK",
	syscall.ENOSYS:       "ENOSYS",
	syscall.EOPNOTSUPP:   "EOPNOTSUPP",
	syscall.EINVAL:       "EINVAL",
}

// errnoName returns errno's symbolic name, or "".
func errnoName(errno syscall.Errno) string { return errnoNames[errno] }

// dirRefusesWrites returns why the process may not create files in dir (an
// *fs.PathError), or nil.
func dirRefusesWrites(dir string) error {
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return &fs.PathError{Op: "access", Path: dir, Err: err}
	}
	return nil
}

// writeProbe asks whether the process may write the file at path, as
// SQLite did before it fell back to reading it only, and returns why not
// (an *fs.PathError wrapping the errno), or nil. It asks access(2) with the
// effective IDs: opening and closing the file would drop the POSIX locks
// this process's connections hold on it.
func writeProbe(path string) error {
	if err := unix.Faccessat(unix.AT_FDCWD, path, unix.W_OK, unix.AT_EACCESS); err != nil {
		return &fs.PathError{Op: writeProbeOp, Path: path, Err: err}
	}
	return nil
}

// shmDMSOffset is the byte of the -shm file every connection holds a read
// lock on while it has the file open (SQLite's unix VFS: UNIX_SHM_DMS).
const shmDMSOffset = 128

// shmInUse reports whether another process holds a lock on the -shm file
// f's deadman-switch byte: whether it has the database open.
func shmInUse(f interface{ Fd() uintptr }) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: shmDMSOffset, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type != unix.F_UNLCK
}
