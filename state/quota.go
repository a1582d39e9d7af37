package state

import (
	"database/sql"
	"errors"
	"fmt"
	"syscall"

	"github.com/statekit/statekit/state/vfs"
)

// A write the kernel refused because the disk quota was spent (EDQUOT) is
// a full disk, as ENOSPC is. SQLite's native VFS tells the two apart: a
// write that fails with ENOSPC is SQLITE_FULL, every other failed write,
// EDQUOT included, SQLITE_IOERR_WRITE, which alone would end the handle
// (ErrIO). Both are refused before anything is written, and SQLite rolls
// the transaction back the same way after either, so the engine reads the
// errno SQLite kept for the connection when a statement fails with
// SQLITE_IOERR_WRITE, and classify makes EDQUOT ErrDiskFull: the handle
// goes on, and works again once the quota has room. A sync that fails with
// EDQUOT or ENOSPC stays an I/O error (SQLITE_IOERR_FSYNC): writes the
// file system had taken are lost. The Go VFS (WithFS) reports EDQUOT as a
// full disk itself (vfs.ErrNoSpace).

// sqliteIOErrWrite is SQLITE_IOERR_WRITE, the extended result code of a
// failed write.
const sqliteIOErrWrite = sqliteIOErr | 3<<8

// quotaError is a statement's error for a write the kernel refused with
// EDQUOT. It wraps the driver's error and syscall.EDQUOT.
type quotaError struct{ err error }

func (e *quotaError) Error() string {
	return fmt.Sprintf("%v (cause: %s)", e.err, errnoText(syscall.EDQUOT))
}

func (e *quotaError) Unwrap() []error { return []error{e.err, syscall.EDQUOT} }

// quotaRefused returns err as a quotaError when it is a failed write and
// the errno SQLite kept on the driver connection dc is EDQUOT, else err.
func quotaRefused(dc any, err error) error {
	if err == nil || sqliteExtendedCode(err) != sqliteIOErrWrite || errors.As(err, new(*quotaError)) {
		return err
	}
	if driverErrno(dc) != syscall.EDQUOT {
		return err
	}
	return &quotaError{err: err}
}

// quotaRefusedOn is quotaRefused for a statement run on conn.
func quotaRefusedOn(conn *sql.Conn, err error) error {
	if err == nil || sqliteExtendedCode(err) != sqliteIOErrWrite || conn == nil {
		return err
	}
	_ = conn.Raw(func(dc any) error {
		err = quotaRefused(dc, err)
		return nil
	})
	return err
}

// quotaSpent reports whether the full disk err reports is a spent quota:
// the native VFS's write refused with EDQUOT, or the FS's (WithFS) last
// error EDQUOT.
func (db *DB) quotaSpent(err error) bool {
	if errors.Is(err, syscall.EDQUOT) {
		return true
	}
	return db.vfsName != "" && errors.Is(vfs.LastError(db.vfsName), syscall.EDQUOT)
}
