package vfs

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"
)

// A write the kernel refused for want of room, a full disk (ENOSPC) or a
// spent quota (EDQUOT), is ErrNoSpace, which SQLite hears as SQLITE_FULL:
// the transaction rolls back and the handle goes on. Any other error is
// not.
func TestOSErrorsOfAWriteWithNoRoom(t *testing.T) {
	for _, tc := range []struct {
		errno   syscall.Errno
		noSpace bool
	}{
		{syscall.ENOSPC, true},
		{syscall.EDQUOT, true},
		{syscall.EFBIG, true},
		{syscall.EIO, false},
		{syscall.EROFS, false},
	} {
		err := osErr(&fs.PathError{Op: "write", Path: "x.state-wal", Err: tc.errno})
		if got := errors.Is(err, ErrNoSpace); got != tc.noSpace {
			t.Errorf("%v: wraps ErrNoSpace = %v, want %v", tc.errno, got, tc.noSpace)
		}
		if !errors.Is(err, tc.errno) {
			t.Errorf("%v: the errno is lost: %v", tc.errno, err)
		}
	}
}
