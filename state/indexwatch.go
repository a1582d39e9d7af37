package state

import (
	"database/sql"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// Watching the shared index for another handle's loss. On a file system
// that drops a failed sync's writes (as reported of XFS), the commits made since the WAL's
// last good sync, and pages a checkpoint copied into the database file
// since that file's last sync, are gone for every process at once. The
// handle whose sync failed marks the shared index for rebuilding
// (indexforget.go); every other writable handle watches the index header
// for that mark, through the shared memory its connection has mapped, in
// two places:
//
//   - Before it claims a time (advanceHWM): its latest high-water mark row
//     may have been among the lost commits, though the handle lives on and
//     goes on handing out the times that row covered, and an Open after
//     the loss would read an older mark and could start behind them. When
//     the header is marked, or was rebuilt since the handle last looked,
//     the handle writes its mark again before the time is used. SQLite's
//     recovery, which rebuilds the index, starts the header's change
//     counter over (it counts commits, and never goes down otherwise), so
//     a rebuild shows as that counter going down. A rebuild for another
//     reason (a writer that died while it wrote the header) costs one
//     needless write of the mark.
//   - At every commit of its connection (SQLite's commit hook): a
//     transaction that began before the mark read with the index it began
//     with, through what the loss took back (a lease row as it was before
//     a grant, say), and would commit pages built on it over the rebuilt
//     file: a fencing token granted twice. The mark without a lock lands
//     while the transaction runs (the one under the write lock waits for
//     it), so a commit that finds the header marked is turned into a
//     rollback, and the verb fails with ErrIO saying why; the handle ends,
//     as after any I/O error.
//
// A look reads a few bytes of the shared memory: nothing waits for it. What
// neither look can catch is a loss the failing handle has not marked yet
// (it marks once its sync returns and it has read back what was lost), and
// a read that returned before the mark (CORRECTNESS.md).

// shmChangeOffset is the offset of the index header's change counter
// (iChange, 32 bits in the machine's byte order), which is followed by
// isInit (shmIsInitOffset).
const shmChangeOffset = 8

// sqliteConstraintCommitHook is SQLITE_CONSTRAINT_COMMITHOOK: a commit the
// commit hook turned into a rollback.
const sqliteConstraintCommitHook = sqlite3.SQLITE_CONSTRAINT_COMMITHOOK

// indexWatch is the handle's view of the shared index header, and what it
// last saw of it.
type indexWatch struct {
	view   *shmView // the connection's view of the shared memory; nil when it has none
	id     uintptr  // the commit hook's registration in watchedHandles; 0: none
	change uint32   // the change counter last seen
	seen   bool     // change holds a value
}

// watchedHandles maps the argument the commit hook is registered with to
// its handle.
var (
	watchedHandles sync.Map // uintptr -> *DB
	watchIDs       atomic.Uintptr
)

// installIndexWatch takes conn's view of the shared memory and registers
// commitGuard as conn's commit hook, for a writable handle. It maps
// nothing: the view is used only once conn has read the index. Without
// this driver's SQLite handle or a VFS with shared memory the handle
// watches nothing.
func (db *DB) installIndexWatch(conn *sql.Conn) {
	if db.cfg.readOnly {
		return
	}
	_ = conn.Raw(func(dc any) error {
		h := sqliteHandle(dc)
		v, ok := newShmView(dc)
		if h == 0 || !ok {
			return nil
		}
		db.watch.view = v
		id := watchIDs.Add(1)
		watchedHandles.Store(id, db)
		var fp uintptr
		*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&fp)) = commitGuard
		tls := libc.NewTLS()
		defer tls.Close()
		sqlite3.Xsqlite3_commit_hook(tls, h, fp, id)
		db.watch.id = id
		return nil
	})
}

// commitGuard is SQLite's commit hook on the handle's connection: it
// returns 1, turning the commit into a rollback, when the shared index is
// marked for rebuilding (see above). It runs inside the commit, on the
// goroutine holding mu.
func commitGuard(_ *libc.TLS, arg uintptr) int32 {
	v, ok := watchedHandles.Load(arg)
	if !ok {
		return 0
	}
	if v.(*DB).indexMarkedNow() {
		return 1
	}
	return 0
}

// indexMarkedNow reports whether either copy of the shared index header is
// marked as not initialised. Callers hold mu, in a transaction.
func (db *DB) indexMarkedNow() bool {
	if db.watch.view == nil {
		return false
	}
	region := db.watch.view.region()
	if region == 0 {
		return false
	}
	return *(*byte)(unsafe.Add(cptr(region), shmIsInitOffset)) == 0 ||
		*(*byte)(unsafe.Add(cptr(region), shmHeaderBytes+shmIsInitOffset)) == 0
}

// indexRebuilt reports whether the shared index header is marked for
// rebuilding, or was rebuilt, since the handle last looked; a header that a
// writer is changing at that instant says nothing, and is looked at next
// time. Callers hold mu.
func (db *DB) indexRebuilt() bool {
	w := &db.watch
	if w.view == nil {
		return false
	}
	region := w.view.region()
	if region == 0 {
		return false
	}
	change, init, ok := headerChange(region)
	if !ok {
		return false
	}
	rebuilt := init == 0 || (w.seen && change < w.change)
	w.change, w.seen = change, true
	return rebuilt
}

// closeWatch drops the commit hook's registration and frees the view, once
// the connection is closed.
func (db *DB) closeWatch() {
	if db.watch.id != 0 {
		watchedHandles.Delete(db.watch.id)
		db.watch.id = 0
	}
	if db.watch.view != nil {
		db.watch.view.close()
		db.watch.view = nil
	}
}

// headerChange returns the change counter and isInit of the index header
// at region, or false when its two copies differ there (a writer is
// changing it).
func headerChange(region uintptr) (change uint32, init byte, ok bool) {
	var first, second [8]byte
	for i := range first { // byte by byte, as indexHeaderAt reads C memory
		first[i] = *(*byte)(unsafe.Add(cptr(region), shmChangeOffset+i))
		second[i] = *(*byte)(unsafe.Add(cptr(region), shmHeaderBytes+shmChangeOffset+i))
	}
	if first != second {
		return 0, 0, false
	}
	return binary.NativeEndian.Uint32(first[:4]), first[shmIsInitOffset-shmChangeOffset], true
}
