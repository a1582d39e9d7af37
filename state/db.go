package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/internal/hooks"
)

// DB is a handle on one statekit file. It is safe for concurrent use by
// many goroutines; several processes may open the same file at once.
type DB struct {
	path string
	dsn  string // the driver's name for the file, for the checkpoint connection
	cfg  config

	sqldb      *sql.DB
	guard      *sql.DB // a read-only connection held while Open runs (openGuard)
	unregister func()  // releases a Go VFS registered for WithFS; nil otherwise

	// mu serialises every statement on conn. One connection and one lock
	// means goroutines queue in Go instead of spinning on SQLite's lock.
	mu                  sync.Mutex
	q                   queue // write verbs waiting for mu (group.go)
	conn                *sql.Conn
	st                  *stmts
	time                *engineTime           // set at open; Now reads it without mu
	hwmMillis           int64                 // the value of this handle's mark row in the file
	hwmKey              string                // this handle's mark row ("hwm:<n>"); "" when read-only
	watch               indexWatch            // the shared index header as the handle last saw it (indexwatch.go)
	pages               pageCounter           // counts the pages conn writes, for checkpointIfDue
	vfsName             string                // the Go VFS registered for WithFS; "" for the native VFS
	dead                atomic.Bool           // failed is set: read without mu by IncrBuffered
	deadErr             atomic.Pointer[error] // failed, for readers without mu (failedEarlier)
	ckptFailed          atomic.Pointer[error] // the background checkpointer's fatal error, set before it takes mu to note it (usable)
	wait                waitBudget            // what SQLite may still wait for, for the verb holding mu (busy.go)
	busyID              uintptr               // the busy handler's registration; 0: SQLite's own handler
	files               fileIDs               // the file and its -wal and -shm as Open found them (walcheck.go)
	damage              error                 // what another program did to them: no checkpoint may copy the WAL
	counted             string                // the real path counted in handlesHere while open (walcheck.go)
	writeVersion        byte                  // the file format write version in the header, as Open found it
	failed              error                 // the I/O error or corruption that ended this handle
	lockless            bool                  // the file system stopped granting locks under the handle (locklost.go)
	file                *dbFile               // the process's descriptor of the file on the native VFS (dbfile.go)
	wal                 fileSyncer            // the WAL, opened at Open to sync it apart from SQLite (walsync.go)
	syncedPages         int                   // pagesWritten at the WAL's last sync by syncWAL; -2 before one
	unsyncedBeforeReset bool                  // pages written before a reset of that count were not synced
	walDirSynced        bool                  // syncWALDir ran
	closed              bool
	closeDone           chan struct{} // closed once the first Close has returned; a second one waits for it
	writes              int           // writes since the last inline sweep batch
	sweepRows           int           // rows the next sweep batch may delete (sweep.go)
	sweepBehind         bool          // the last inline sweep deleted all it could: the next comes sooner (afterWrite)

	buf buffer
	bg  background

	// remote is the store behind a handle opened from a URL (remote.go);
	// nil for a file, whose fields above it then leaves unused.
	remote remote
	rcalls remoteCalls // a remote handle's calls in flight, which Close waits for
}

// Path returns the file name the DB was opened with, or for a URL the URL
// with its password replaced by "xxxxx".
func (db *DB) Path() string { return db.path }

// Now returns the engine's time: the larger of the wall clock at open and
// the file's high-water mark, advanced by the monotonic clock since open.
// It is the now every verb uses for deadlines.
//
// Now does not wait for the handle's lock, so it returns at once while a
// commit runs. What it returns is what it would return holding the lock at
// some moment within the call: the clock it reads only moves forward and
// the latest time used only grows, so it is at or after the time of every
// verb that returned before Now was called, and at or before the time of
// every verb called after Now returned. Under the simulator's scheduler it
// is a scheduling point, and then reads without the lock as in production,
// so the simulator checks the read a program makes, beside a commit in
// flight included.
func (db *DB) Now() time.Time {
	if db.remote != nil {
		return db.remote.Now()
	}
	if s := db.cfg.sched; s != nil {
		s.Wait(nil)
	}
	ms := db.bugNow(db.time.peekMillis())
	if f := db.cfg.nows; f != nil {
		f(ms)
	}
	return time.UnixMilli(ms)
}

// access says what a verb does to the file.
type access int

const (
	reading  access = iota // reads only
	writing                // writes, and counts toward the inline sweep
	grouped                // as writing, and may share a transaction (group.go)
	sweeping               // writes, but is itself a sweep
)

// do runs one verb under the lock at the engine's now. It refuses calls
// after Close, after a fatal error, with a done context, and writes on a
// read-only handle; it keeps the high-water mark ahead of now; it ends the
// handle on an I/O error or corruption.
func (db *DB) do(ctx context.Context, a access, fn func(now int64) error) error {
	if a == grouped || a == sweeping {
		return db.doQueued(ctx, a, fn)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("statekit: %w", err)
	}
	start := db.cfg.clock.Monotonic()
	early := db.bugClaimEarly(ctx)
	if err := db.lockCtx(ctx); err != nil {
		return err
	}
	defer db.unlock()
	if err := db.usable(a); err != nil {
		return err
	}
	db.setWait(ctx, db.cfg.clock.Monotonic()-start)
	now, err := db.claimTime(ctx, early)
	if err != nil {
		return err
	}
	err = db.note(fn(now))
	if serr := db.syncCommitted(err == nil && a == writing); serr != nil {
		return serr
	}
	if err != nil {
		return err
	}
	if a == writing {
		db.bg.ckpt.wrote(1)
		db.afterWrite(ctx, now)
	}
	return nil
}

// claimTime returns the time a verb runs at, first moving the high-water
// mark ahead of it when due. Every verb, a read too, fails if the mark
// cannot be written (a full disk, a busy file): no verb may use a time that
// a restart could go back behind. Within the mark's lead (hwmLeadMillis)
// no write is due, so on a full disk reads go on for that long. Callers
// hold mu. early is 0 but with a planted bug (bugClaimEarly).
func (db *DB) claimTime(ctx context.Context, early int64) (int64, error) {
	now := early
	if now == 0 {
		now = db.time.nowMillis()
		db.claimed(ctx, now)
	}
	if err := db.advanceHWM(ctx, now); err != nil {
		return 0, db.note(err)
	}
	return now, nil
}

// claimed tells the internal observers, if any, the time the verb called
// with ctx (or background task) runs at.
func (db *DB) claimed(ctx context.Context, now int64) {
	if f := db.cfg.times; f != nil {
		f(now)
	}
	hooks.NoteNow(ctx, now)
}

// lock takes mu: through the scheduler when one runs the handle, so that
// taking the lock is a point where another goroutine may run first.
func (db *DB) lock() {
	if s := db.cfg.sched; s != nil {
		s.Wait(db.mu.TryLock)
		return
	}
	db.mu.Lock()
}

// lockCtx is lock for a verb's caller, who gives up when ctx ends first
// and gets its error: a verb of the handle stuck in the kernel (a disk that
// stalls, a file system frozen for a snapshot) holds no other caller past
// its deadline. A caller that gives up leaves a goroutine to take the lock
// and hand it on (unlock). Under a scheduler it is lock: the simulator's
// contexts do not end.
func (db *DB) lockCtx(ctx context.Context) error {
	if db.cfg.sched != nil {
		db.lock()
		return nil
	}
	if db.mu.TryLock() {
		return nil
	}
	done := ctx.Done()
	if done == nil {
		db.mu.Lock()
		return nil
	}
	got, gaveUp := make(chan struct{}), make(chan struct{})
	go func() {
		db.mu.Lock()
		select {
		case got <- struct{}{}:
		case <-gaveUp:
			db.unlock()
		}
	}()
	select {
	case <-got:
		return nil
	case <-done:
		close(gaveUp)
		return fmt.Errorf("statekit: %w", ctx.Err())
	}
}

// nothingToDo is a verb whose arguments leave it nothing to write (Del of
// no keys; DecrBy(math.MinInt64), whose overflow needs no look at the file):
// it still says what any verb would, a closed or failed handle or a done
// context, so no call after Close passes.
func (db *DB) nothingToDo(ctx context.Context) error {
	if db.remote != nil {
		_, err := viaRemote(db, func(remote) (struct{}, error) {
			if err := ctx.Err(); err != nil {
				return struct{}{}, fmt.Errorf("statekit: %w", err)
			}
			return struct{}{}, nil
		})
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("statekit: %w", err)
	}
	if err := db.lockCtx(ctx); err != nil {
		return err
	}
	defer db.unlock()
	return db.usable(reading)
}

// usable reports why the handle cannot run a verb now, or nil. Callers hold mu.
func (db *DB) usable(a access) error {
	if p := db.ckptFailed.Load(); p != nil && db.failed == nil {
		db.note(*p)
	}
	switch {
	case db.closed:
		return ErrClosed
	case db.failed != nil:
		return fmt.Errorf("the handle failed earlier, reopen the file: %w", db.failed)
	case a != reading && db.cfg.readOnly:
		return fmt.Errorf("%w: the handle was opened WithReadOnly", ErrReadOnly)
	}
	return nil
}

// note explains err with its cause (explain), ends the handle on a fatal
// error and returns err. Callers hold mu, right after the statement on the
// handle's connection that failed.
func (db *DB) note(err error) error {
	if err == nil {
		return nil
	}
	if db.failed == nil {
		err = db.explain(db.conn, err)
	}
	if db.failed == nil && errors.Is(err, ErrDiskFull) {
		err = db.refusedWrite(err) // walfull.go
		if !fatal(err) {
			// The WAL's own room, once all in the file, is room for the
			// next writes: they start it over from its beginning.
			if db.cfg.runsBackground() {
				db.bg.ckpt.request()
			} else if !db.cfg.readOnly && db.conn != nil && db.autocommit() {
				db.checkpointNow(context.Background())
			}
		}
	}
	if fatal(err) && db.failed == nil {
		db.failed = err
		db.deadErr.Store(&err)
		db.dead.Store(true)
		if db.cfg.bugs.Has(bugs.CheckpointAfterFailedSync) {
			db.bg.ckpt.request()
		}
	}
	return err
}
