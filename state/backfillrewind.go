package state

import (
	"database/sql"
	"sync/atomic"
	"time"
	"unsafe"

	sqlite3 "modernc.org/sqlite/lib"
)

// The backfill mark moved back after a failed sync of a checkpoint. A
// checkpoint pass that a reader's snapshot stops short of the WAL's end
// copies pages into the database file and moves the backfill mark past
// them without syncing the file; the next pass's sync (SQLite's, or
// syncDB's) is what makes them durable. When that sync fails on a kernel
// that keeps the failed pages readable but marks them clean (ext4), the
// kernel may reclaim any of them at any moment afterwards, and the file
// then reads back as the disk has it: older pages. Every reader of every
// process, trusting the mark, takes those pages from the file, and a
// writer commits on them (a lease table's page read back without a FULL
// grant hands out its token again).
//
// So the handle whose checkpoint's sync failed moves the mark back to 0
// before it gives up, under the checkpointer's lock (no checkpoint of any
// process runs meanwhile): every transaction that starts from then on
// takes each page with a frame in the WAL from its last frame there,
// which a sync before that copy made durable; the WAL cannot start over
// (it does only once the mark reaches its end); and the next checkpoint
// copies every frame again, writing the pages the kernel may have
// reclaimed anew and syncing them. Nothing is rebuilt, so no connection
// contends for recovery's locks. What it cannot undo is a read made
// before it: a transaction already running keeps the mark it began with,
// and a page reclaimed between the failed sync and the move is read back
// old by whoever reads it first (CORRECTNESS.md, "I/O error").

// rewindBackfill moves the backfill mark of the index conn shares back to
// 0 (see above), through conn, one of the handle's writable connections,
// outside a transaction; callers keep its other users off it. It waits for
// the checkpointer's lock as long as the busy timeout, and leaves the mark
// as it is when the lock stays taken.
func (db *DB) rewindBackfill(conn *sql.Conn) {
	if conn == nil || db.cfg.readOnly || db.cfg.keepIndex || db.lockless {
		return
	}
	_ = conn.Raw(func(dc any) error {
		v, region := indexRegion(dc)
		if v == nil {
			return nil
		}
		defer v.close()
		if !db.lockSlot(v, walCkptLock) {
			return nil
		}
		defer v.lock(walCkptLock, 1, sqlite3.SQLITE_SHM_UNLOCK|sqlite3.SQLITE_SHM_EXCLUSIVE)
		atomic.StoreUint32((*uint32)(unsafe.Add(cptr(region), shmBackfillOffset)), 0)
		return nil
	})
}

// lockSlot takes v's shared-memory lock slot exclusively, retrying on the
// busy schedule for as long as the busy timeout; it reports whether it
// holds the slot.
func (db *DB) lockSlot(v *shmView, slot int32) bool {
	var slept time.Duration
	for try := 0; ; try++ {
		switch v.lock(slot, 1, sqlite3.SQLITE_SHM_LOCK|sqlite3.SQLITE_SHM_EXCLUSIVE) {
		case sqlite3.SQLITE_OK:
			return true
		case sqlite3.SQLITE_BUSY:
			if slept >= db.cfg.busyTimeout {
				return false
			}
			d := busyDelays[min(try, len(busyDelays)-1)]
			db.cfg.sleepStop(d, nil)
			slept += d
		default:
			return false
		}
	}
}

// forgetCheckpoint is what a handle does after a checkpoint's sync failed,
// of the WAL or of the database file (SQLite's error does not say which):
// it moves the backfill mark back (rewindBackfill), then marks the shared
// index for rebuilding if the sync took frames of the WAL back
// (forgetIndex). The mark goes first: the look for lost writes reads the
// WAL, and every read is a moment at which the kernel may reclaim a failed
// page and another process read it through the mark.
func (db *DB) forgetCheckpoint(conn *sql.Conn) {
	db.rewindBackfill(conn)
	db.forgetIndex(conn)
}
