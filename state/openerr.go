package state

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"

	sqlite "modernc.org/sqlite"
)

// readOnlyFile reports whether SQLite treats the file on conn as read-only
// although conn was opened to write.
func readOnlyFile(conn *sql.Conn) bool {
	ro := false
	_ = conn.Raw(func(dc any) error {
		if c, ok := dc.(interface{ IsReadOnly(string) (bool, error) }); ok {
			ro, _ = c.IsReadOnly("main")
		}
		return nil
	})
	return ro
}

// cannotWrite explains why SQLite opened the file for reading only,
// although Open asked to write: a header naming a file format write
// version SQLite does not know is damage (ErrCorrupt); otherwise the
// operating system refused to open it for writing (a file mode, another
// owner, a read-only file system), which is ErrReadOnly with that cause.
func (db *DB) cannotWrite() error {
	if db.cfg.fs != nil || db.writeVersion > 2 {
		return fmt.Errorf("%w: %s: SQLite can only read it (its header names a file format write version it does not know)", ErrCorrupt, db.path)
	}
	return fmt.Errorf("open %s: %w", db.path, readOnlyError("cannot write it", writeProbe(db.path)))
}

// fileFormatOffset is where SQLite's header keeps the file format's write
// version (sqlite.org/fileformat.html: 1 legacy, 2 WAL; above 2 SQLite
// only reads the file).
const fileFormatOffset = 18

// openCause explains an error of Open with the operating system's cause:
// a file SQLite could not open (too many open files, a directory it may
// not write, a read-only file system) is ErrCannotOpen, or ErrReadOnly when
// writing was refused, wrapping the failed call and its errno as SQLite
// logged it after mark, or ErrDiskFull when the file system had no room
// to create the -wal or -shm file, or a write found the quota spent or
// the file size limit reached; an I/O error gets the errno SQLite saw.
func (db *DB) openCause(err error, mark uint64) error {
	switch {
	case explained(err):
		return err
	case errors.Is(err, ErrDiskFull) && db.roomSpent(err) != 0:
		// A spent quota or the file size limit (noroom.go).
		errno := db.roomSpent(err)
		return &causeError{
			msg: fmt.Sprintf("open %s: %v: no room to write the file: %s: %s",
				db.path, ErrDiskFull, roomText(errno), errnoText(errno)),
			errs: []error{err, errno},
		}
	case sqliteCode(err) == sqliteCantOpen:
		cause := osCause(db.path, mark)
		if missingSidecar(cause) {
			// SQLite could not create the -wal or -shm file and, trying
			// to open it for reading only, found none: the cause is why
			// it could not create it.
			if perr := writeProbe(db.path); perr != nil {
				cause = perr
			} else if derr := dirRefusesWrites(filepath.Dir(db.path)); derr != nil {
				cause = derr
			} else if room := noRoomToCreate(filepath.Dir(db.path)); room != "" {
				var pe *fs.PathError
				errors.As(cause, &pe)
				return &causeError{
					msg: fmt.Sprintf("open %s: %v: cannot create %s: the file system holding it has no free %s (%s)",
						db.path, ErrDiskFull, pe.Path, room, errnoText(syscall.ENOSPC)),
					errs: []error{ErrDiskFull, ErrCannotOpen, syscall.ENOSPC},
				}
			}
		}
		if writeRefused(cause) {
			return fmt.Errorf("open %s: %w", db.path, readOnlyError("cannot create or write the files beside it", cause))
		}
		if cause == nil {
			return &causeError{msg: fmt.Sprintf("open %s: %v: %v", db.path, ErrCannotOpen, err), errs: []error{ErrCannotOpen, err}}
		}
		return &causeError{
			msg:  fmt.Sprintf("open %s: %v: %s (%v)", db.path, ErrCannotOpen, osCauseText(cause), err),
			errs: []error{ErrCannotOpen, cause, err},
		}
	case db.cfg.readOnly && sqliteExtendedCode(err) == sqliteReadOnlyRollback:
		return unfinishedWrite(db.path, db.cfg.fs == nil && readOnlyFS(db.path), err)
	case errors.Is(err, ErrReadOnly) && sqliteCode(err) == sqliteReadOnly:
		// SQLite could not create the -wal or -shm file
		// (SQLITE_READONLY_DIRECTORY, _CANTINIT).
		if derr := dirRefusesWrites(filepath.Dir(db.path)); derr != nil {
			return fmt.Errorf("open %s: %w", db.path, cannotCreateSidecars(derr, err))
		}
	case errors.Is(err, ErrIO):
		e := db.explain(db.conn, err)
		var errno syscall.Errno
		switch {
		case sqliteExtendedCode(err) == sqliteIOErrShmSize:
			// SQLite could not grow the -shm file: a process opening
			// the file first on a full disk creates it.
			if cause := osCause(db.path, mark); errors.As(cause, &errno) && (errno == syscall.ENOSPC || roomErrno(errno)) {
				return &causeError{
					msg: fmt.Sprintf("open %s: %v: no room for the index beside the file: %s",
						db.path, ErrDiskFull, osCauseText(cause)),
					errs: []error{ErrDiskFull, cause},
				}
			}
		case sqliteExtendedCode(err) == sqliteIOErrShmMap && errors.As(e, &errno) && mapRefused(errno):
			return &causeError{
				msg: fmt.Sprintf("open %s: %v: the file system refuses to map %s%s into memory (%s); statekit's "+
					"connections and processes share its index through that map: keep the file on a file system "+
					"that allows it, such as a local disk", db.path, ErrCannotOpen, db.path, shmSuffix, errnoText(errno)),
				errs: []error{ErrCannotOpen, errno},
			}
		case sqliteExtendedCode(err) == sqliteIOErrLock && errors.As(e, &errno) && locksRefusedErrno(errno):
			return locksRefused(db.path, &fs.PathError{Op: "fcntl", Path: db.path + shmSuffix, Err: errno})
		}
		if explained(e) {
			return e
		}
		if sqliteExtendedCode(err) == sqliteIOErr {
			if errno := db.openReadErrno(); errno != 0 {
				return &causeError{
					msg:  fmt.Sprintf("%v (cause: a read of the file failed: %s)", err, errnoText(errno)),
					errs: []error{err, errno},
				}
			}
		}
	}
	return err
}

// writeRefused reports whether cause, a failed call SQLite logged, refused
// to let the process write: a read-only file system, or a -wal, -shm or
// -journal file it may not create or write. (A database file it may not
// even read is not that: SQLite opens it read-only when it may read it.)
func writeRefused(cause error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	if !errors.As(cause, &pe) || !errors.As(pe.Err, &errno) || !refusesWrites(errno) {
		return false
	}
	if errno == syscall.EROFS || pe.Op == "access" || pe.Op == writeProbeOp {
		return true
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if strings.HasSuffix(pe.Path, suffix) {
			return true
		}
	}
	return false
}

// missingSidecar reports whether cause says a -wal or -shm file was not
// there to open.
func missingSidecar(cause error) bool {
	var pe *fs.PathError
	return errors.As(cause, &pe) && errors.Is(pe.Err, fs.ErrNotExist) &&
		(strings.HasSuffix(pe.Path, "-wal") || strings.HasSuffix(pe.Path, "-shm"))
}

// osCauseText describes an *fs.PathError SQLite logged: "open
// /dir/app.state-wal: too many open files (EMFILE)".
func osCauseText(cause error) string {
	var pe *fs.PathError
	var errno syscall.Errno
	if errors.As(cause, &pe) && errors.As(pe.Err, &errno) {
		return fmt.Sprintf("%s %s: %s", pe.Op, pe.Path, errnoText(errno))
	}
	return cause.Error()
}

// journalSuffix names the rollback journal beside the file.
const journalSuffix = "-journal"

// unfinishedWrite is the error of a read-only Open that found a hot
// rollback journal (SQLITE_READONLY_ROLLBACK in err), on a read-only file
// system when roFS (it wraps syscall.EROFS then): not ErrReadOnly, which
// would say the file may not be written.
func unfinishedWrite(path string, roFS bool, err error) error {
	var se *sqlite.Error
	errors.As(err, &se)
	who, errs := "an Open that may write does it", []error{ErrUnfinishedWrite, se}
	if roFS {
		who = "an Open that may write does it, on the file system mounted writable"
		errs = append(errs, syscall.EROFS)
	}
	return &causeError{
		msg: fmt.Sprintf("open %s: %v: %s%s holds the pages to put back, which a read-only open may not do; "+
			"%s (%v)", path, ErrUnfinishedWrite, path, journalSuffix, who, se),
		errs: errs,
	}
}
