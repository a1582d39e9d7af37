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
