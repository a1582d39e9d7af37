package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/statekit/statekit/state/vfs"
	sqlite "modernc.org/sqlite"
)

// Checkpoints. A checkpoint copies the WAL back into the database file and
// syncs both; under synchronous=NORMAL that sync waits for every WAL frame
// written since the last one to reach the disk, milliseconds after a few
// thousand commits. SQLite's automatic checkpoint makes whichever statement
// ends with the WAL past 1000 frames wait for it, holding the handle's lock.
// When the background goroutines run, one of them checkpoints instead,
// every checkpointEvery writes, on a connection of its own: without the
// lock, copying and syncing while verbs go on committing, then, if only a
// few commits came meanwhile (or the WAL is long), under the lock for
// those. The WAL is then entirely in the database file, so the next write
// starts it over from the beginning, overwriting the file in place: a
// synchronous=FULL commit that overwrites syncs about as fast as appending
// a record to a file, one that appends to the WAL takes about twice as
// long. The handle still checkpoints on its own connection, under its
// lock, every checkpointBackstopFrames pages it writes (checkpointIfDue),
// for when the background one cannot keep up.
const (
	// checkpointEvery is how many writes pass between two background
	// checkpoints.
	checkpointEvery = 4000
	// checkpointForceFrames is the WAL length at which the background
	// checkpoint ends with its pass under the lock however many commits
	// come meanwhile, so that the WAL restarts there, between verbs, and
	// not in the middle of one at the backstop.
	checkpointForceFrames = 12000
	// checkpointBackstopFrames is how many pages the handle writes between
	// two checkpoints it runs itself while the background checkpointer
	// runs (1000, SQLite's automatic interval, otherwise), for when the
	// background checkpoint cannot keep up.
	checkpointBackstopFrames = 16000
	// checkpointPasses bounds the passes of one background checkpoint
	// without the lock.
	checkpointPasses = 3
	// checkpointTailWrites is how many commits a pass may see made while
	// it ran for the last pass, under the lock, to be short.
	checkpointTailWrites = 16
	// checkpointSQL copies what it can without waiting for anyone.
	checkpointSQL = `PRAGMA wal_checkpoint(PASSIVE)`
)

// checkpointer runs background checkpoints on its own connection, opened
// at Open.
type checkpointer struct {
	kick     chan struct{} // buffered: a pending request; nil when not running
	every    int           // writes between two requests (checkpointEvery, or less: adapt); guarded by DB.mu
	whole    bool          // the last checkpoint's last pass copied the whole WAL; guarded by DB.mu
	writes   int           // writes since the last request; guarded by DB.mu
	total    atomic.Int64  // every write counted, read without DB.mu
	sqldb    *sql.DB       // the checkpoint connection's pool, from Open
	conn     *sql.Conn     // the checkpoint connection, pinned: its WAL descriptor predates repairWAL
	file     fileSyncer    // the database file, to sync after each pass without the lock (syncDB)
	reopened bool          // the planted bug CheckpointAfterFailedSync reopened conn
}

// wrote counts n writes (a sweep batch counts for a few: it writes several
// pages) and asks for a checkpoint every c.every. Callers hold
// DB.mu.
func (c *checkpointer) wrote(n int) {
	if c.kick == nil {
		return
	}
	c.total.Add(int64(n))
	c.writes += n
	if c.writes < c.every {
		return
	}
	c.writes = 0
	c.request()
}

// request asks for a checkpoint, if the checkpointer runs.
func (c *checkpointer) request() {
	if c.kick == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default: // one is pending already
	}
}

// checkpoint runs one background checkpoint: passes without the lock, each
// followed by a sync of the database file (syncDB), until one sees at most
// checkpointTailWrites commits made while it ran, or a WAL of
// checkpointForceFrames, then a last pass under the lock, which copies and
// syncs only what was committed since. If the
// passes never get there (verbs commit faster than a pass syncs), it leaves
// the rest to the next checkpoint. A busy file is left for the next checkpoint; an I/O error
// or corruption ends the handle, as it would on the main connection: a
// failed sync is never retried as if nothing happened.
func (c *checkpointer) checkpoint(db *DB) {
	for pass := 0; ; pass++ {
		if db.dead.Load() && !c.bugReopen(db) {
			return // a connection that saw a sync fail must not checkpoint
		}
		if found := db.outsideDamage(c.conn); len(found) > 0 {
			db.lock()
			db.refuseOutsideDamage()
			db.unlock()
			return // never copy a damaged WAL into the file
		}
		before := c.total.Load()
		frames, copied, err := c.run()
		failedSync := syncFailed(err)
		if err == nil && copied > 0 {
			err = c.syncDB(db)
			failedSync = err != nil
		}
		if err != nil {
			if fatal(err) && c.bugReopen(db) {
				continue
			}
			if fatal(err) {
				err = fmt.Errorf("checkpoint: %w", db.explain(c.conn, err)) // its own connection's cause
				// Before the wait for the lock: a verb that takes it
				// meanwhile ends the handle instead of reading pages the
				// failed sync may have taken back (a file system that
				// drops a failed sync's writes) and committing on them.
				db.ckptFailed.Store(&err)
			}
			if failedSync {
				db.forgetCheckpoint(c.conn) // pages the sync took back (indexforget.go, backfillrewind.go)
			}
			if fatal(err) {
				db.lock()
				db.note(err)
				db.unlock()
			}
			return
		}
		if c.total.Load()-before <= checkpointTailWrites || frames >= checkpointForceFrames {
			break
		}
		if pass == checkpointPasses-1 {
			return
		}
	}
	db.lock()
	defer db.unlock()
	if db.closed || db.failed != nil {
		return
	}
	own := -1 // pages this process wrote since the WAL was last all in the file
	if db.pages != nil {
		own, _, _ = db.pages.Status(sqlite.DBStatusCacheWrite, false)
	}
	frames, copied, err := c.runLast(db)
	if err != nil {
		if syncFailed(err) {
			db.forgetCheckpoint(c.conn)
		}
		if fatal(err) {
			db.note(fmt.Errorf("checkpoint: %w", db.explain(c.conn, err)))
		}
		return
	}
	if c.whole {
		c.adapt(db.cfg.checkpointEvery, int64(own), frames)
	}
	c.whole = frames > 0 && copied == frames
	// When the WAL is all in the file, the backstop counts pages from
	// here, so it stays idle while this checkpointer keeps up.
	if copied == frames {
		db.resetPagesWritten()
	}
}

// open opens the checkpoint connection and has it open the WAL, at Open,
// before repairWAL: a sync that fails from then on is reported to it
// (walrepair.go).
func (c *checkpointer) open(ctx context.Context, dsn string) error {
	sqldb, conn, err := openWALConn(ctx, dsn)
	if err != nil {
		return err
	}
	c.sqldb, c.conn = sqldb, conn
	return nil
}

// openFile opens the database file syncDB syncs, at Open: through fsys
// when the handle runs on one, else the process's descriptor of it
// (dbfile.go), which the handle holds.
func (c *checkpointer) openFile(fsys vfs.FS, path string, shared *dbFile) error {
	if fsys == nil && shared != nil {
		c.file = sharedSyncer{shared.f}
		return nil
	}
	f, err := openSyncer(fsys, path, "", vfs.OpenMainDB)
	if err != nil {
		return err
	}
	c.file = f
	return nil
}

// run runs one passive checkpoint and returns the WAL's length in frames
// and how many of them are in the file.
func (c *checkpointer) run() (frames, copied int64, err error) {
	ctx := context.Background()
	var busy int64
	err = c.conn.QueryRowContext(ctx, checkpointSQL).Scan(&busy, &frames, &copied)
	return frames, copied, classify(ctx, roomRefusedOn(c.conn, err))
}

// close closes the checkpoint connection, if one was opened.
func (c *checkpointer) close() error {
	if c.sqldb == nil {
		return nil
	}
	err := errors.Join(c.conn.Close(), c.sqldb.Close(), c.closeFile())
	c.sqldb, c.conn = nil, nil
	return err
}

// checkpointEveryPages is how many pages the handle writes to the WAL
// between two checkpoints it runs itself, under its lock, on its own
// connection: the only checkpoints without the background checkpointer, and
// a backstop with it when commits come faster than it copies. SQLite's
// automatic checkpoint, which this replaces, runs every 1000 pages.
func (db *DB) checkpointEveryPages() int {
	if db.cfg.runsBackground() {
		return checkpointBackstopFrames
	}
	return 1000
}

// pageCounter is the driver connection's sqlite3_db_status.
type pageCounter interface {
	Status(op sqlite.DBStatusOp, reset bool) (current, high int, err error)
}

// countPages finds the driver connection's page counter.
func (db *DB) countPages(ctx context.Context) error {
	return db.conn.Raw(func(dc any) error {
		pc, ok := dc.(pageCounter)
		if !ok {
			return fmt.Errorf("statekit: driver connection %T has no Status", dc)
		}
		db.pages = pc
		return nil
	})
}

// checkpointIfDue runs a passive checkpoint once the handle has written
// checkpointEveryPages pages to the WAL. SQLite's automatic checkpoint is
// off (wal_autocheckpoint=0) because it ignores its own errors: here a
// failed sync ends the handle, as it would in a commit. A busy file waits
// for the next one. Callers hold mu.
func (db *DB) checkpointIfDue(ctx context.Context) {
	if db.pages == nil {
		return
	}
	written, _, err := db.pages.Status(sqlite.DBStatusCacheWrite, false)
	if err != nil || written < db.checkpointEveryPages() {
		return
	}
	db.checkpointNow(ctx)
}

// checkpointNow runs a passive checkpoint on the handle's connection, as
// checkpointIfDue does when one is due; and right after a write refused
// for want of room when no background checkpointer runs to be asked
// (note): once the WAL is in the file, the next write starts it over in
// the room it has. Callers hold mu, outside a transaction.
func (db *DB) checkpointNow(ctx context.Context) {
	if db.refuseOutsideDamage() != nil {
		return // never copy a damaged WAL into the file
	}
	db.resetPagesWritten()
	var busy, frames, copied int64
	err := db.conn.QueryRowContext(context.WithoutCancel(ctx), checkpointSQL).Scan(&busy, &frames, &copied)
	if syncFailed(err) {
		db.forgetCheckpoint(db.conn)
	}
	if err = classify(ctx, roomRefusedOn(db.conn, err)); err != nil && fatal(err) {
		db.note(fmt.Errorf("checkpoint: %w", err))
	}
}

// checkpointAtOpen copies the whole WAL into the file, syncs it and empties
// the WAL before a writable handle starts. After a process failed a sync,
// the WAL can hold frames that read back fine but never reached the disk;
// without this, a later FULL commit appended behind them would sync over
// that hole and still be lost, with every commit after the hole, on a power
// loss. It does not wait: another process reading or writing the file at
// that moment leaves the WAL as it is (and a hole, if any, with it); an I/O
// error fails the open. Callers hold the handle's connection (Open).
func (db *DB) checkpointAtOpen(ctx context.Context) error {
	var busy, frames, copied int64
	err := db.withoutBusyWait(ctx, func() error {
		return db.conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &copied)
	})
	if c := sqliteCode(err); c == sqliteBusy || c == sqliteLocked {
		err = nil
	}
	if syncFailed(err) {
		db.forgetCheckpoint(db.conn)
	}
	return roomRefusedOn(db.conn, err)
}

// withoutBusyWait runs fn, statements on the handle's connection, with
// SQLite's busy wait off: a lock held by another connection fails fn at
// once. Callers hold mu, or the connection (Open).
func (db *DB) withoutBusyWait(ctx context.Context, fn func() error) error {
	if db.busyID != 0 {
		saved := db.wait
		db.noWait()
		defer func() { db.wait = saved }()
		return fn()
	}
	// SQLite's own busy handler, with the busy timeout (busy.go).
	if _, err := db.conn.ExecContext(ctx, `PRAGMA busy_timeout=0`); err != nil {
		return err
	}
	err := fn()
	_, rerr := db.conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf(`PRAGMA busy_timeout=%d`, db.cfg.busyTimeout.Milliseconds()))
	if err == nil {
		err = rerr
	}
	return err
}
