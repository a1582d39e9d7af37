package state

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"slices"
	"unsafe"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/statekit/statekit/internal/bugs"
)

// The shared index forgotten after a failed sync. A sync that fails on a
// file system that drops the writes it was to make durable (as reported of XFS) takes
// them back: the WAL's frames written since its last sync read back as
// what was there before (zeros, or frames of a WAL since started over),
// and pages a checkpoint copied into the database file since the file's
// last sync read back as they were. Every connection, in every process,
// still trusts the WAL's shared-memory index: it counts the lost frames
// as committed and reads them, and its backfill mark says which frames'
// pages are in the database file, so it reads the pages taken back from
// there. A reader then answers with old rows or reads damage, and a writer
// commits pages built on them.
//
// So a handle whose sync of the WAL or of the database file fails looks,
// the moment it knows, for what the failure took back (lostWrites: a frame
// the index counts that breaks the WAL's checksum chain, a page of the file
// that is not the frame the index says was copied into it), and if it
// finds any, has the index rebuilt: it marks the index header as not
// initialised (isInit 0, in both of its copies), first without a lock and
// again under the WAL's write lock (a writer that was committing meanwhile
// writes a whole header over the first mark). Every connection's next
// transaction then finds the header so and runs SQLite's recovery, which
// reads the WAL from its start and stops at the first frame whose checksum
// breaks the chain: the index counts the commits before the hole, as after
// a power loss, and its backfill mark starts at 0, so every page with a
// frame in the WAL is read from its last frame there and none from the
// pages taken back; the next checkpoint copies them all again. On a file
// system that keeps a failed sync's writes readable (ext4) nothing is
// found and the index is left as it is: a rebuild would find it as it was,
// and every connection of every process rebuilding at once contends for
// the locks recovery takes (in the simulator, until SQLite gave up with
// "locking protocol"). What the mark cannot undo is a read made before it:
// a transaction already running goes on with the index it began with, and
// a file system that drops pages when its write-back fails, before any
// sync reports it, serves them to everyone until a sync does
// (CORRECTNESS.md).

// walWriteLock is the shared-memory lock slot of the WAL's writer
// (WAL_WRITE_LOCK): SQLite writes the index header only while holding it.
const walWriteLock = 0

// sqliteIOErrFsync is SQLITE_IOERR_FSYNC, the extended result code of a
// failed sync (inside SQLite: a checkpoint's sync of the WAL before it
// copies, and of the database file after).
const sqliteIOErrFsync = sqliteIOErr | 4<<8

// forgetIndex marks the shared index for rebuilding (see above), through
// conn, one of the handle's writable connections, outside a transaction;
// callers keep its other users off it (mu for the handle's connection).
// It waits for a writer's lock as long as the busy timeout, and leaves the
// first mark alone when the lock stays taken.
func (db *DB) forgetIndex(conn *sql.Conn) {
	// A read-only handle syncs nothing; on a file system that stopped
	// granting locks (locklost.go) the write lock would only be waited for.
	if conn == nil || db.cfg.readOnly || db.cfg.keepIndex || db.lockless {
		return
	}
	_ = conn.Raw(func(dc any) error {
		v, region := indexRegion(dc)
		if v == nil {
			return nil
		}
		defer v.close()
		if !db.lostWrites(region) {
			return nil
		}
		markUninitialised(region)
		if db.lockSlot(v, walWriteLock) {
			markUninitialised(region)
			v.lock(walWriteLock, 1, sqlite3.SQLITE_SHM_UNLOCK|sqlite3.SQLITE_SHM_EXCLUSIVE)
		}
		return nil
	})
}

// syncFailure is the error of a sync the repair made through a descriptor
// of its own (walrepair.go).
type syncFailure struct{ err error }

func (e *syncFailure) Error() string { return e.err.Error() }
func (e *syncFailure) Unwrap() error { return e.err }

// syncFailed reports whether err is a failed sync: SQLite's
// (SQLITE_IOERR_FSYNC) or the repair's own (syncFailure).
func syncFailed(err error) bool {
	return sqliteExtendedCode(err) == sqliteIOErrFsync || errors.As(err, new(*syncFailure))
}

// forgetIfSyncFailed returns err, having moved the backfill mark back
// (rewindBackfill) when err is a failed sync, and then marked the shared
// index for rebuilding (see above) if the sync took writes back: conn
// holds the write lock (DB.locked), so no writer changes the header
// meanwhile.
func (db *DB) forgetIfSyncFailed(conn *sql.Conn, err error) error {
	if db.cfg.keepIndex || db.lockless || !syncFailed(err) {
		return err
	}
	db.rewindBackfill(conn) // the sync may have been the database file's (backfillrewind.go)
	_ = conn.Raw(func(dc any) error {
		if v, region := indexRegion(dc); v != nil {
			if db.lostWrites(region) {
				markUninitialised(region)
			}
			v.close()
		}
		return nil
	})
	return err
}

// indexRegion returns dc's view of the shared memory and the region the
// index header is in, or nil when it has none mapped.
func indexRegion(dc any) (*shmView, uintptr) {
	v, ok := newShmView(dc)
	if !ok {
		return nil, 0
	}
	region := v.region()
	if region == 0 {
		v.close()
		return nil, 0
	}
	return v, region
}

// Offsets in the shared memory: the database's size in pages (nPage) in
// the index header, and the backfill mark (nBackfill, the first field of
// the checkpoint information after the header's two copies), the last
// frame whose page a checkpoint copied into the database file.
const (
	shmDBPagesOffset  = 20
	shmBackfillOffset = 2 * shmHeaderBytes
)

// lostWrites reports whether the WAL or the database file reads back less
// than the index at region says they hold: a frame the index counts that
// breaks the WAL's checksum chain, or a page of the database file that
// differs from its last frame the backfill mark says was copied into it
// (of the pages with no frame past the mark). On a file system that keeps
// a failed sync's writes readable both read back whole, and the index is
// left as it is. The check runs without the write lock, so another
// process may commit, start the WAL over or checkpoint while it reads:
// when it finds a loss it reads the index header and the mark again, and
// when either moved on it looks again, up to three times, as
// holeBeforeOpen does. A header a writer is changing, a file that cannot
// be read, or an index that never holds still is taken as a loss: marking
// the index costs one rebuild.
func (db *DB) lostWrites(region uintptr) bool {
	for try := 0; ; try++ {
		found, before := db.lostWritesOnce(region)
		if found == "" {
			return false
		}
		after, ok := indexHeaderAt(region)
		settled := ok && before != nil && bytes.Equal(before, append(after, backfillAt(region)...))
		if settled || try == 2 {
			if found != "unreadable" {
				db.foundLoss(found)
			}
			return true
		}
	}
}

// backfillAt returns the backfill mark of the index at region, as bytes.
func backfillAt(region uintptr) []byte {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], *(*uint32)(unsafe.Add(cptr(region), shmBackfillOffset)))
	return b[:]
}

// lostWritesOnce is one look of lostWrites: what it found ("wal", "file",
// "unreadable" for a file it could not read or a header being changed, ""
// for nothing) and the index header and backfill mark it looked with (nil
// when it could not read them).
func (db *DB) lostWritesOnce(region uintptr) (found string, looked []byte) {
	hdr, ok := indexHeaderAt(region)
	if !ok {
		return "unreadable", nil
	}
	if hdr[shmIsInitOffset] == 0 {
		return "", nil // marked already, or never built
	}
	mark := backfillAt(region)
	looked = append(slices.Clone(hdr), mark...)
	backfill := binary.NativeEndian.Uint32(mark)
	copied := map[uint32]uint32{} // page -> its last frame among those copied
	past := map[uint32]bool{}     // pages with a frame past the mark
	wal := db.path + walSuffix
	brk, err := walScan(db.cfg.fs, wal, hdr, func(i uint32, frame []byte) {
		if page := binary.BigEndian.Uint32(frame); i <= backfill {
			copied[page] = i
		} else {
			past[page] = true
		}
	})
	if err != nil {
		return "unreadable", looked
	}
	if brk != 0 {
		return "wal", looked
	}
	// A checkpoint stopped short by a reader's snapshot copies no page whose
	// last frame lies past where it stops, and still moves the mark there:
	// such a page of the file may be older than its last frame under the
	// mark, and readers take it from the WAL. Only the others must match.
	if !db.cfg.bugs.Has(bugs.LossCheckEveryPage) {
		for page := range past {
			delete(copied, page)
		}
	}
	if len(copied) == 0 {
		return "", looked
	}
	size := int(binary.NativeEndian.Uint16(hdr[shmPageSizeOffset:]))
	if size == 1 {
		size = 65536
	}
	differ, unreadable := db.pagesDiffer(wal, copied, size, binary.NativeEndian.Uint32(hdr[shmDBPagesOffset:]))
	switch {
	case unreadable:
		return "unreadable", looked
	case differ:
		return "file", looked
	}
	return "", looked
}

// foundLoss tells the simulator's observer, if any, of a loss lostWrites
// found (hooks.Engine.LossFound).
func (db *DB) foundLoss(what string) {
	if db.cfg.lossFound != nil {
		db.cfg.lossFound(what)
	}
}

// pagesDiffer reports whether a page of the database file (of the first
// dbPages) differs from the WAL frame copied names for it, reads back
// short, or cannot be read (then unreadable is set too). It reads the database file through
// the process's descriptor on the operating system's files (closing
// another would drop the process's locks).
func (db *DB) pagesDiffer(wal string, copied map[uint32]uint32, size int, dbPages uint32) (differ, unreadable bool) {
	f, err := openForRewrite(db.cfg.fs, wal)
	if err != nil || f == nil {
		return true, true
	}
	defer f.Close()
	var file io.ReaderAt
	if db.cfg.fs != nil {
		pf, err := openForRewrite(db.cfg.fs, db.path)
		if err != nil || pf == nil {
			return true, true
		}
		defer pf.Close()
		file = pf
	} else if db.file != nil && db.file.f != nil {
		file = db.file.f
	} else {
		return true, true
	}
	want, got := make([]byte, size), make([]byte, size)
	frame := int64(walFrameHeaderBytes + size)
	for _, page := range slices.Sorted(maps.Keys(copied)) {
		if page == 0 || page > dbPages {
			continue // past the file's end: nobody reads it
		}
		i := copied[page]
		if ok, err := readFull(f, want, walHeaderBytes+int64(i-1)*frame+walFrameHeaderBytes); !ok {
			return true, err != nil
		}
		if ok, err := readFull(file, got, int64(page-1)*int64(size)); !ok || !bytes.Equal(want, got) {
			return true, err != nil // a short read is a loss too
		}
	}
	return false, false
}

// indexMarked reports whether the index conn shares is marked for
// rebuilding (markUninitialised) and not rebuilt yet: not initialised,
// though it counts frames, which only the mark leaves.
func indexMarked(conn *sql.Conn) bool {
	hdr, ok := sharedIndexHeader(conn)
	return ok && hdr[shmIsInitOffset] == 0 && binary.NativeEndian.Uint32(hdr[shmMaxFrameOffset:]) > 0
}

// markUninitialised clears isInit in both copies of the index header at
// the start of region.
func markUninitialised(region uintptr) {
	*(*byte)(unsafe.Add(cptr(region), shmIsInitOffset)) = 0
	*(*byte)(unsafe.Add(cptr(region), shmHeaderBytes+shmIsInitOffset)) = 0
}
