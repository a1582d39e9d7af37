package state

import (
	"database/sql"
	"errors"
	"fmt"
	"syscall"

	"github.com/statekit/statekit/state/vfs"
)

// A write the kernel refused for want of room is a full disk, as ENOSPC
// is, whichever room ran out: the disk quota was spent (EDQUOT), or the
// file reached the largest size it may have (EFBIG: the process's file
// size limit, RLIMIT_FSIZE, which a service manager may set, or the file
// system's largest file; Go ignores the SIGXFSZ that comes with it).
// SQLite's native VFS tells these apart from ENOSPC: a write that fails
// with ENOSPC is SQLITE_FULL, every other failed write SQLITE_IOERR_WRITE,
// which alone would end the handle (ErrIO). Each is refused before the
// refused bytes are written (a write that crosses the size limit writes
// what fits, and SQLite's next write for the rest is refused), and SQLite
// rolls the transaction back the same way after either, so the engine
// reads the errno SQLite kept for the connection when a statement fails
// with SQLITE_IOERR_WRITE, and classify makes EDQUOT and EFBIG
// ErrDiskFull: the handle goes on (what a refused write left in the WAL
// past its last commit is cut away: walfull.go), and works again once
// there is room. A sync that fails with EDQUOT or ENOSPC stays an I/O
// error (SQLITE_IOERR_FSYNC): writes the file system had taken are lost.
// The Go VFS (WithFS) reports EDQUOT and EFBIG as a full disk itself
// (vfs.ErrNoSpace).

// sqliteIOErrWrite is SQLITE_IOERR_WRITE, the extended result code of a
// failed write.
const sqliteIOErrWrite = sqliteIOErr | 3<<8

// roomErrnos are the errnos of a failed write that found no room, besides
// ENOSPC, which SQLite reports as SQLITE_FULL itself.
func roomErrno(errno syscall.Errno) bool {
	return errno == syscall.EDQUOT || errno == syscall.EFBIG
}

// roomError is a statement's error for a write the kernel refused with
// one of roomErrno's errnos. It wraps the driver's error and the errno.
type roomError struct {
	err   error
	errno syscall.Errno
}

func (e *roomError) Error() string {
	return fmt.Sprintf("%v (cause: %s)", e.err, errnoText(e.errno))
}

func (e *roomError) Unwrap() []error { return []error{e.err, e.errno} }

// roomRefused returns err as a roomError when it is a failed write and the
// errno SQLite kept on the driver connection dc is EDQUOT or EFBIG, else
// err.
func roomRefused(dc any, err error) error {
	if err == nil || sqliteExtendedCode(err) != sqliteIOErrWrite || errors.As(err, new(*roomError)) {
		return err
	}
	errno := driverErrno(dc)
	if !roomErrno(errno) {
		return err
	}
	return &roomError{err: err, errno: errno}
}

// roomRefusedOn is roomRefused for a statement run on conn.
func roomRefusedOn(conn *sql.Conn, err error) error {
	if err == nil || sqliteExtendedCode(err) != sqliteIOErrWrite || conn == nil {
		return err
	}
	_ = conn.Raw(func(dc any) error {
		err = roomRefused(dc, err)
		return nil
	})
	return err
}

// roomSpent returns which room the full disk err reports ran out of:
// EDQUOT or EFBIG from the native VFS's refused write, or the FS's
// (WithFS) last error; else 0.
func (db *DB) roomSpent(err error) syscall.Errno {
	var re *roomError
	if errors.As(err, &re) {
		return re.errno
	}
	if db.vfsName == "" {
		return 0
	}
	var errno syscall.Errno
	if errors.As(vfs.LastError(db.vfsName), &errno) && roomErrno(errno) {
		return errno
	}
	return 0
}

// roomText says what ran out, for roomSpent's errno.
func roomText(errno syscall.Errno) string {
	if errno == syscall.EFBIG {
		return "the file reached the largest size it may have (the process's file size limit, " +
			"RLIMIT_FSIZE, or the file system's largest file)"
	}
	return "the disk quota is spent"
}
