package state

import (
	"database/sql"
	"errors"
	"syscall"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// A read the disk failed. SQLite's unix VFS reports a read that failed with
// EIO (or ENXIO, ERANGE) as SQLITE_IOERR_CORRUPTFS, which SQLite returns as
// SQLITE_CORRUPT, "database disk image is malformed", and it leaves no
// errno behind (sqlite3_system_errno is kept for I/O errors only). So a
// disk that stopped answering (an ext4 file system shut down under the
// process: TestKernelPowerCutProcesses) looked like a damaged file to every
// process whose next statement read, while the file itself was sound. Each
// file SQLite opens keeps the errno of its latest failed system call
// (SQLITE_FCNTL_LAST_ERRNO); readErrno reads it from the database file and
// the WAL of conn, so explain can tell a failed read from damage.

// readErrno returns EIO, ENXIO or ERANGE when the latest failed system call
// on conn's database file or its WAL ended with one (what the unix VFS turns
// into SQLITE_CORRUPT), else 0. It reads the driver connection's SQLite
// handle, as systemErrno does.
func readErrno(conn *sql.Conn) syscall.Errno {
	if conn == nil {
		return 0
	}
	var found syscall.Errno
	_ = conn.Raw(func(dc any) error {
		h := sqliteHandle(dc)
		if h == 0 {
			return nil
		}
		tls := libc.NewTLS()
		defer tls.Close()
		zMain, err := libc.CString("main")
		if err != nil {
			return nil
		}
		defer libc.Xfree(tls, zMain)
		arg := tls.Alloc(8)
		defer tls.Free(8)
		*(*int64)(cmem(arg)) = 0
		if sqlite3.Xsqlite3_file_control(tls, h, zMain, sqlite3.SQLITE_FCNTL_LAST_ERRNO, arg) == sqlite3.SQLITE_OK {
			found = readFailure(*(*int32)(cmem(arg)))
		}
		if found != 0 {
			return nil
		}
		*(*uintptr)(cmem(arg)) = 0
		if sqlite3.Xsqlite3_file_control(tls, h, zMain, sqlite3.SQLITE_FCNTL_JOURNAL_POINTER, arg) != sqlite3.SQLITE_OK {
			return nil
		}
		wal := *(*uintptr)(cmem(arg)) // the WAL's sqlite3_file in WAL mode
		if wal == 0 {
			return nil
		}
		methods := (*sqlite3.Tsqlite3_file)(cmem(wal)).FpMethods
		if methods == 0 {
			return nil // not open
		}
		fp := (*sqlite3.Tsqlite3_io_methods)(cmem(methods)).FxFileControl
		if fp == 0 {
			return nil
		}
		xFileControl := *(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&fp))
		*(*int64)(cmem(arg)) = 0
		if xFileControl(tls, wal, sqlite3.SQLITE_FCNTL_LAST_ERRNO, arg) == sqlite3.SQLITE_OK {
			found = readFailure(*(*int32)(cmem(arg)))
		}
		return nil
	})
	return found
}

// readFailure returns errno when it is one the unix VFS reports as
// corruption after a failed read, else 0.
func readFailure(errno int32) syscall.Errno {
	switch e := syscall.Errno(errno); e {
	case syscall.EIO, syscall.ENXIO, syscall.ERANGE:
		return e
	}
	return 0
}

// cmem returns the address p, memory of libc's allocator (never the Go
// heap), as an unsafe.Pointer, as state/vfs does for its C memory.
func cmem(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// openReadErrno returns the errno of a read of the database file's header
// through the process's descriptor of it (dbfile.go), or 0 when the read
// succeeds or fails without one. A connection that fails to open has no
// extended result codes yet: a header read the disk failed comes back as a
// bare SQLITE_IOERR, "disk I/O error (10)", with no errno kept anywhere
// (an Open beside a handle, after an ext4 file system was shut down under
// both: TestKernelPowerCut). Reading the header again is the call that
// failed, done once more.
func (db *DB) openReadErrno() syscall.Errno {
	if db.file == nil || db.file.f == nil {
		return 0
	}
	var header [100]byte
	_, err := db.file.f.ReadAt(header[:], 0)
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}
