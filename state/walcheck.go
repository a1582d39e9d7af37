package state

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// Damage from outside. Another program can truncate, replace or delete the
// -wal or -shm file beside the database, or the database file itself, while
// a handle has them open: SQLite notices none of it (it trusts its index of
// the WAL, in the -shm file, and reads past the end of a truncated WAL as
// zeros), and the next checkpoint copies what is left into the database
// file: every key unreadable after. The engine looks where it is cheap, on
// the native VFS: at Check, at every background checkpoint and at Close,
// and whenever a writable handle moves its high-water mark (at most every
// 500 ms of use). It compares the WAL with its index (the index names
// frames the WAL must hold, and the salts its header must carry), and the
// files at the three paths with the files opened at Open. What it finds
// ends the handle with ErrCorrupt before a checkpoint copies it; Check
// reports it as findings. Open looks too, when another process has the
// file open, and refuses a damaged WAL before SQLite reads through it (a
// reader's recovery would drop the commits the index names, silently, for
// every process). Through WithFS (a simulated disk) the -shm file is memory
// and nothing is looked at.
//
// The index is read through the handle's own connection
// (sqlite3_snapshot_get: the index header its read transaction uses), never
// by opening the -shm file: closing any descriptor of a file drops every
// POSIX lock the process holds on it, SQLite's too. Open reads the -shm
// file only while no handle of this process has the file open. The -wal
// file carries no lock, and is read.

// Offsets in the index header (sqlite.org/walformat.html; the -shm file
// starts with two copies of it, 48 bytes each, and sqlite3_snapshot_get
// returns one): isInit at byte 12, the page size at 14 (16 bits, 1 for
// 65536), the last valid frame (mxFrame) at 16 and the salts at 32 (8
// bytes, as in the WAL header), all in the machine's byte order but the
// salts. The WAL header's salts are at its byte 16.
const (
	shmHeaderBytes    = 48
	shmIsInitOffset   = 12
	shmPageSizeOffset = 14
	shmMaxFrameOffset = 16
	shmSaltOffset     = 32
	walSaltOffset     = 16
	saltBytes         = 8
)

// sidecars are the files the engine compares with those opened at Open.
var sidecars = []string{"", "-wal", "-shm"}

// fileIDs are the files at the database's path and its -wal and -shm, as
// Open found them (nil where there was none).
type fileIDs [3]fs.FileInfo

// noteFiles records the files at path, path-wal and path-shm (the names
// SQLite uses: after symbolic links). It only stats them. Callers run Open.
func (db *DB) noteFiles() {
	if db.cfg.fs != nil {
		return
	}
	base := realPath(db.path)
	for i, suffix := range sidecars {
		if fi, err := os.Stat(base + suffix); err == nil {
			db.files[i] = fi
		}
	}
}

// realPath is path with symbolic links resolved, as SQLite names the -wal
// and -shm files; path itself when that fails.
func realPath(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return path
}

// outsideDamage returns what another program did to the files beside the
// handle's, one finding each, or none. conn is a connection of the handle
// no one else uses meanwhile (the handle's, under mu, or the checkpoint
// connection); it only reads.
func (db *DB) outsideDamage(conn *sql.Conn) []string {
	if db.cfg.fs != nil || conn == nil {
		return nil
	}
	base := realPath(db.path)
	var out []string
	for i, suffix := range sidecars {
		was := db.files[i]
		if was == nil {
			continue
		}
		now, err := os.Stat(base + suffix)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			out = append(out, fmt.Sprintf("%s was deleted while the file was open: another program deleted it", base+suffix))
		case err == nil && !os.SameFile(was, now):
			out = append(out, fmt.Sprintf("%s is no longer the file opened: another program replaced it", base+suffix))
		}
	}
	if len(out) > 0 {
		return out
	}
	if f := walAgainstIndex(base, func() ([]byte, bool) { return indexHeader(conn) }); f != "" {
		out = append(out, f)
	}
	return out
}

// walAgainstIndex compares the WAL beside base with the index header that
// header reads and returns what is wrong, or "". The header is read before
// and after the WAL: a writer that changed it meanwhile makes it look
// again, and a header that never holds still is taken as sound.
func walAgainstIndex(base string, header func() ([]byte, bool)) string {
	for try := 0; try < 3; try++ {
		h1, ok := header()
		if !ok {
			return ""
		}
		size, salt, err := walHead(base + walSuffix)
		h2, ok := header()
		if !ok || !bytes.Equal(h1, h2) {
			continue
		}
		if err != nil {
			return ""
		}
		return walFinding(base, h1, size, salt)
	}
	return ""
}

// walFinding says what is wrong with a WAL of size bytes whose header
// carries salt, given its index header, or "".
func walFinding(base string, hdr []byte, size int64, salt []byte) string {
	maxFrame := binary.NativeEndian.Uint32(hdr[shmMaxFrameOffset:])
	if hdr[shmIsInitOffset] == 0 || maxFrame == 0 {
		return "" // the WAL holds nothing the index names
	}
	pageSize := int64(binary.NativeEndian.Uint16(hdr[shmPageSizeOffset:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	want := walHeaderBytes + int64(maxFrame)*(walFrameHeaderBytes+pageSize)
	switch {
	case size < want:
		return fmt.Sprintf("wal: %s is %d bytes, shorter than the %d frames its index (%s-shm) names (%d bytes): "+
			"another program truncated it; the commits in it are lost", base+walSuffix, size, maxFrame, base, want)
	case !bytes.Equal(salt, hdr[shmSaltOffset:shmSaltOffset+saltBytes]):
		return fmt.Sprintf("wal: the header of %s does not match its index (%s-shm): "+
			"another program replaced or overwrote it; the commits in it are lost", base+walSuffix, base)
	}
	return ""
}

// walHead returns the size of the WAL file at name and the salts in its
// header (zeros if it is too short to hold them).
func walHead(name string) (int64, []byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, nil, err
	}
	salt := make([]byte, saltBytes)
	if _, err := f.ReadAt(salt, walSaltOffset); err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, err
	}
	return st.Size(), salt, nil
}

// indexHeader returns the WAL index header a fresh read transaction on conn
// uses (sqlite3_snapshot_get), or false when it cannot be had (not in WAL
// mode, a driver without the SQLite handle, any error).
func indexHeader(conn *sql.Conn) ([]byte, bool) {
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		return nil, false
	}
	defer func() { _, _ = conn.ExecContext(ctx, `ROLLBACK`) }()
	var one int
	// The read transaction begins with the first statement that reads.
	if err := conn.QueryRowContext(ctx, `SELECT 1 FROM sqlite_schema LIMIT 1`).Scan(&one); err != nil {
		return nil, false
	}
	var hdr []byte
	_ = conn.Raw(func(dc any) error {
		h := sqliteHandle(dc)
		if h == 0 {
			return nil
		}
		tls := libc.NewTLS()
		defer tls.Close()
		zDb, err := libc.CString("main")
		if err != nil {
			return nil
		}
		defer libc.Xfree(tls, zDb)
		size := int(unsafe.Sizeof(uintptr(0)))
		pp := tls.Alloc(size)
		defer tls.Free(size)
		if sqlite3.Xsqlite3_snapshot_get(tls, h, zDb, pp) != sqlite3.SQLITE_OK {
			return nil
		}
		snap := *(*uintptr)(cptr(pp))
		defer sqlite3.Xsqlite3_snapshot_free(tls, snap)
		hdr = make([]byte, shmHeaderBytes)
		for i := range hdr { // byte by byte: a copy from C memory here crashes go1.26's compiler
			hdr[i] = *(*byte)(unsafe.Add(cptr(snap), i))
		}
		return nil
	})
	return hdr, hdr != nil
}

// cptr returns the address p, of memory libc's allocator gave SQLite
// (never the Go heap), as an unsafe.Pointer.
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// damagedBeforeOpen compares the WAL beside path with its index in the
// -shm file, before Open's connections read through them, when another
// process has the file open (it holds the -shm file's DMS lock; else the
// index is left from processes gone, and SQLite rebuilds it from the WAL).
// It reads the -shm file only while no handle of this process has the file
// open (see above). It returns the finding, or "".
func damagedBeforeOpen(path string) string {
	base := realPath(path)
	if openHere(base) {
		return ""
	}
	return walAgainstIndex(base, func() ([]byte, bool) { return shmFileHeader(base + "-shm") })
}

// shmFileHeader reads the WAL index header from the -shm file at name, if
// another process has it open and both copies of the header agree.
func shmFileHeader(name string) ([]byte, bool) {
	f, err := os.Open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if !shmInUse(f) {
		return nil, false
	}
	buf := make([]byte, 2*shmHeaderBytes)
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, false
	}
	if !bytes.Equal(buf[:shmHeaderBytes], buf[shmHeaderBytes:]) {
		return nil, false // a writer is between its two copies
	}
	return buf[:shmHeaderBytes], true
}

// handlesHere counts the handles of this process open on each file (by its
// real path), so that Open knows when it may open and close the -shm file.
var handlesHere struct {
	mu sync.Mutex
	n  map[string]int
}

// openHere reports whether a handle of this process has the file at base
// open.
func openHere(base string) bool {
	handlesHere.mu.Lock()
	defer handlesHere.mu.Unlock()
	return handlesHere.n[base] > 0
}

// countHandle adds d to the handles of this process open on base.
func countHandle(base string, d int) {
	handlesHere.mu.Lock()
	defer handlesHere.mu.Unlock()
	if handlesHere.n == nil {
		handlesHere.n = map[string]int{}
	}
	handlesHere.n[base] += d
	if handlesHere.n[base] <= 0 {
		delete(handlesHere.n, base)
	}
}

// refuseOutsideDamage ends the handle with ErrCorrupt when another program
// damaged its files, before a checkpoint copies a damaged WAL into the
// database file, and returns that error; once found, it returns it again.
// Callers hold mu.
func (db *DB) refuseOutsideDamage() error {
	if db.damage != nil || db.cfg.fs != nil {
		return db.damage
	}
	found := db.outsideDamage(db.conn)
	if len(found) == 0 {
		return nil
	}
	db.damage = db.note(fmt.Errorf("%w: %s", ErrCorrupt, found[0]))
	return db.damage
}
