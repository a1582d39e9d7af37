package state

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"modernc.org/libc"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The operating system's side of an error. SQLite reports a result code
// (SQLITE_CANTOPEN, SQLITE_IOERR_WRITE, ...), not the errno behind it, which
// is what tells a full file-descriptor table from a read-only file system
// or a file the process may not write. It keeps the errno in two places,
// both read here: the connection's "system errno" (sqlite3_system_errno),
// set when a statement fails with an I/O error, and SQLite's error log,
// where the unix VFS names the failed system call, its file and its errno
// ("os_unix.c:47513: (24) open(/dir/app.state-wal) - "), which is the only
// trace of a failed open, since the driver closes a connection that could
// not open. The engine registers a log callback once (sqlite3_config
// SQLITE_CONFIG_LOG, which SQLite allows at any time); it replaces any
// other log callback in the process.

// osLogSize bounds the failed system calls remembered from SQLite's log.
const osLogSize = 64

// osLogEntry is one failed system call SQLite logged.
type osLogEntry struct {
	seq   uint64
	op    string // the system call: open, fsync, ftruncate, ...
	path  string
	errno syscall.Errno
}

// osLog is the ring of the latest failed system calls SQLite logged.
var osLog struct {
	once    sync.Once
	mu      sync.Mutex
	seq     uint64 // entries ever recorded
	entries [osLogSize]osLogEntry
}

// watchSQLiteLog registers the log callback, once per process.
func watchSQLiteLog() {
	osLog.once.Do(func() {
		tls := libc.NewTLS()
		defer tls.Close()
		var fp uintptr
		*(*func(*libc.TLS, uintptr, int32, uintptr))(unsafe.Pointer(&fp)) = sqliteLogged
		va := libc.NewVaList(fp, uintptr(0))
		if va == 0 {
			return
		}
		defer libc.Xfree(tls, va)
		sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_LOG, va)
	})
}

// sqliteLogged is SQLite's log callback: it keeps the failed system calls
// of the unix VFS.
func sqliteLogged(_ *libc.TLS, _ uintptr, _ int32, zMsg uintptr) {
	sqliteLoggedText(libc.GoString(zMsg))
}

// sqliteLoggedText keeps msg if it is a failed system call.
func sqliteLoggedText(msg string) {
	if e, ok := parseOSLog(msg); ok {
		osLog.mu.Lock()
		osLog.seq++
		e.seq = osLog.seq
		osLog.entries[e.seq%osLogSize] = e
		osLog.mu.Unlock()
	}
}

// parseOSLog reads a line of the unix VFS's log:
// "os_unix.c:LINE: (ERRNO) CALL(PATH) - TEXT".
func parseOSLog(msg string) (osLogEntry, bool) {
	_, rest, ok := strings.Cut(msg, "os_unix.c:")
	if !ok {
		return osLogEntry{}, false
	}
	_, rest, ok = strings.Cut(rest, ": (")
	if !ok {
		return osLogEntry{}, false
	}
	num, rest, ok := strings.Cut(rest, ") ")
	if !ok {
		return osLogEntry{}, false
	}
	errno, err := strconv.Atoi(num)
	if err != nil || errno <= 0 {
		return osLogEntry{}, false
	}
	op, rest, ok := strings.Cut(rest, "(")
	if !ok {
		return osLogEntry{}, false
	}
	end := strings.LastIndex(rest, ") - ")
	if end < 0 {
		end = strings.LastIndex(rest, ")")
	}
	if end < 0 {
		return osLogEntry{}, false
	}
	return osLogEntry{op: op, path: rest[:end], errno: syscall.Errno(errno)}, true
}

// osLogMark returns a mark: osCause looks only at calls logged after it.
func osLogMark() uint64 {
	osLog.mu.Lock()
	defer osLog.mu.Unlock()
	return osLog.seq
}

// osCause returns the latest failed system call SQLite logged after mark
// on the database file at path or on its -wal, -shm or -journal, as an
// *fs.PathError wrapping the errno, or nil.
func osCause(path string, mark uint64) error {
	names := map[string]bool{}
	for _, p := range samePaths(path) {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			names[p+suffix] = true
		}
	}
	osLog.mu.Lock()
	defer osLog.mu.Unlock()
	for seq := osLog.seq; seq > mark && osLog.seq-seq < osLogSize; seq-- {
		e := osLog.entries[seq%osLogSize]
		if names[e.path] {
			return &fs.PathError{Op: e.op, Path: e.path, Err: e.errno}
		}
	}
	return nil
}

// samePaths returns the names SQLite may log for path: as given, absolute,
// and with symbolic links resolved (SQLite opens the link's target).
func samePaths(path string) []string {
	out := []string{path}
	if abs, err := filepath.Abs(path); err == nil {
		out = append(out, abs)
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			out = append(out, real)
		}
	}
	return out
}

// systemErrno returns the errno SQLite saw when the latest statement on
// conn failed with an I/O error (sqlite3_system_errno), or 0. It reads the
// driver connection's SQLite handle, which modernc.org/sqlite (pinned in
// go.mod) keeps in its field db; a driver without it gives 0.
func systemErrno(conn *sql.Conn) syscall.Errno {
	if conn == nil {
		return 0
	}
	var errno syscall.Errno
	_ = conn.Raw(func(dc any) error {
		errno = driverErrno(dc)
		return nil
	})
	return errno
}

// driverErrno is systemErrno for the driver connection dc.
func driverErrno(dc any) syscall.Errno {
	h := sqliteHandle(dc)
	if h == 0 {
		return 0
	}
	tls := libc.NewTLS()
	defer tls.Close()
	return syscall.Errno(sqlite3.Xsqlite3_system_errno(tls, h))
}

// refusesWrites reports whether errno says the file may not be written:
// the file system is read-only, or the process lacks the permission.
func refusesWrites(errno syscall.Errno) bool {
	return errno == syscall.EROFS || errno == syscall.EACCES || errno == syscall.EPERM
}

// errnoText names errno for a message: "read-only file system (EROFS)".
func errnoText(errno syscall.Errno) string {
	if name := errnoName(errno); name != "" {
		return errno.Error() + " (" + name + ")"
	}
	return errno.Error()
}

// writeProbeOp names writeProbe's question in its errors.
const writeProbeOp = "open to write"

// readOnlyError is an ErrReadOnly for a file that cannot be written: it
// says what (what) and why (cause, an *fs.PathError, or nil when unknown),
// and how to read the file anyway.
func readOnlyError(what string, cause error) error {
	detail := ""
	if cause != nil {
		detail = ": " + osCauseText(cause)
	}
	return &causeError{
		msg:  fmt.Sprintf("%v: %s%s; to read it, open it WithReadOnly", ErrReadOnly, what, detail),
		errs: []error{ErrReadOnly, cause},
	}
}

// cannotCreateSidecars is an ErrReadOnly for a file whose directory does
// not let SQLite create the -wal and -shm files it needs to read or write
// a WAL file; cause says why (an *fs.PathError).
func cannotCreateSidecars(cause, sqliteErr error) error {
	return &causeError{
		msg: fmt.Sprintf("%v: cannot create the -wal and -shm files SQLite reads and writes the file with: %s (%v)",
			ErrReadOnly, osCauseText(cause), sqliteText(sqliteErr)),
		errs: []error{ErrReadOnly, cause, sqliteErr},
	}
}

// causeError is an error the engine has explained with its operating-system
// cause: it wraps a sentinel, the cause and what SQLite said.
type causeError struct {
	msg  string
	errs []error
}

func (e *causeError) Error() string { return e.msg }

// Unwrap returns the sentinels and causes the error wraps.
func (e *causeError) Unwrap() []error {
	out := make([]error, 0, len(e.errs))
	for _, err := range e.errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// explained reports whether err already carries its cause.
func explained(err error) bool {
	var ce *causeError
	return errors.As(err, &ce)
}

// sqliteText is what SQLite said in err ("attempt to write a readonly
// database (1544)"), without the engine's context around it.
func sqliteText(err error) string {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Error()
	}
	return err.Error()
}
