package state

import (
	"database/sql"

	sqlite3 "modernc.org/sqlite/lib"
)

// The page repair behind a reader's older snapshot. A reader that keeps a
// snapshot older than the WAL's end stops every checkpoint short of it, so
// the repair cannot wait for one that copies the whole WAL: it would wait
// for the whole busy timeout at every Open beside such a reader (a sqlite3
// shell left in a transaction, a backup tool that keeps one open) and then
// leave the pages as they are. It does not need one. The pages a checkpoint
// may have written without a sync that reached the disk are those of the
// frames up to the backfill mark: a checkpoint moves the mark only past
// frames whose pages it wrote or skipped, and a checkpoint that copies the
// whole WAL syncs the file before it moves the mark, so the pages of frames
// past the mark are written again, from their last frame, by the next
// checkpoint. What the repair must not race is a checkpoint writing a newer
// page between its read and its write, and a writer starting the WAL over:
// so it holds the checkpointer's lock of the shared index (no checkpoint
// of any process runs meanwhile; theirs find it busy and copy nothing, as
// beside another checkpoint) besides the write lock, reads the mark, and
// rewrites in place, and syncs, the pages of the database file that the
// frames up to the mark name, each with its last frame up to the mark,
// which is what a checkpoint copied there (walpages.go). A page with a
// frame past the mark was not written by that checkpoint, and is left to
// the next, which writes it from its last frame.

// walCkptLock is the shared-memory lock slot of the checkpointer
// (WAL_CKPT_LOCK): a checkpoint writes the database file, and moves the
// backfill mark, only while holding it.
const walCkptLock = 1

// repairBehindSnapshot rewrites, and syncs, the pages of the database file
// that the WAL's frames up to the backfill mark name, holding the
// checkpointer's lock through conn, which holds the write lock (DB.locked).
// It reports false, having written nothing, when the lock is taken (a
// checkpoint runs), the index is not at hand or the WAL does not hold
// every frame up to the mark intact: repairPages tries again.
func (db *DB) repairBehindSnapshot(conn *sql.Conn) (bool, error) {
	if db.lockless {
		return false, nil
	}
	var repaired bool
	err := conn.Raw(func(dc any) error {
		v, region := indexRegion(dc)
		if v == nil {
			return nil
		}
		defer v.close()
		if v.lock(walCkptLock, 1, sqlite3.SQLITE_SHM_LOCK|sqlite3.SQLITE_SHM_EXCLUSIVE) != sqlite3.SQLITE_OK {
			return nil
		}
		defer v.lock(walCkptLock, 1, sqlite3.SQLITE_SHM_UNLOCK|sqlite3.SQLITE_SHM_EXCLUSIVE)
		var err error
		repaired, err = db.rewriteBackfilled(region)
		return err
	})
	return repaired, err
}
