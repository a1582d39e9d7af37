package state

import (
	"database/sql"
	"encoding/binary"
	"unsafe"
)

// Watching the shared index for another handle's loss. On a file system
// that drops a failed sync's writes (as reported of XFS), the commits made since the WAL's
// last good sync, and pages a checkpoint copied into the database file
// since that file's last sync, are gone for every process at once. The
// handle whose sync failed marks the shared index for rebuilding
// (indexforget.go); every other writable handle looks at the index header,
// through the shared memory its connection has mapped, each time it claims
// a time (advanceHWM): its latest high-water mark row may have been among
// the lost commits, though the handle lives on and goes on handing out the
// times that row covered, and an Open after the loss would read an older
// mark and could start behind them. When the header is marked, or was
// rebuilt since the handle last looked, the handle writes its mark again
// before the time is used. SQLite's recovery, which rebuilds the index,
// starts the header's change counter over (it counts commits, and never
// goes down otherwise), so a rebuild shows as that counter going down. A
// rebuild for another reason (a writer that died while it wrote the
// header) costs one needless write of the mark. The look reads a few bytes
// of the shared memory: nothing waits for it. It cannot see a loss the
// failing handle has not marked yet (it marks once its sync has returned
// and it has read back what was lost).
//
// A commit hook that refused every commit made while the index was marked
// was tried and taken out: it made another process's healthy verb fail
// with ErrIO after a wrong loss finding (statesim -seed 9774242
// -goroutines 8 -syncerror 0.03, with it), and once the finding was fixed
// (lostWrites leaves pages with a frame past the backfill mark) it no
// longer changed what the simulator finds (CORRECTNESS.md).

// shmChangeOffset is the offset of the index header's change counter
// (iChange, 32 bits in the machine's byte order), which is followed by
// isInit (shmIsInitOffset).
const shmChangeOffset = 8

// indexWatch is the handle's view of the shared index header, and what it
// last saw of it.
type indexWatch struct {
	view   *shmView // the connection's view of the shared memory; nil when it has none
	change uint32   // the change counter last seen
	seen   bool     // change holds a value
}

// installIndexWatch takes conn's view of the shared memory, for a writable
// handle. It maps nothing: the view is used only once conn has read the
// index. Without this driver's SQLite handle or a VFS with shared memory
// the handle watches nothing.
func (db *DB) installIndexWatch(conn *sql.Conn) {
	if db.cfg.readOnly {
		return
	}
	_ = conn.Raw(func(dc any) error {
		db.watch.view, _ = newShmView(dc)
		return nil
	})
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

// closeWatch frees the view, once the connection is closed.
func (db *DB) closeWatch() {
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
