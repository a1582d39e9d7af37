package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/internal/sysclock"
	"github.com/statekit/statekit/state/vfs"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is a handle on one statekit file. It is safe for concurrent use by
// many goroutines; several processes may open the same file at once.
type DB struct {
	path string
	dsn  string // the driver's name for the file, for the checkpoint connection
	cfg  config

	sqldb      *sql.DB
	unregister func() // releases a Go VFS registered for WithFS; nil otherwise

	// mu serialises every statement on conn. One connection and one lock
	// means goroutines queue in Go instead of spinning on SQLite's lock.
	mu        sync.Mutex
	q         queue // write verbs waiting for mu (group.go)
	conn      *sql.Conn
	st        *stmts
	time      engineTime
	hwmMillis int64       // the value of this handle's mark row in the file
	hwmKey    string      // this handle's mark row ("hwm:<n>"); "" when read-only
	pages     pageCounter // counts the pages conn writes, for checkpointIfDue
	vfsName   string      // the Go VFS registered for WithFS; "" for the native VFS
	dead      atomic.Bool // failed is set: read without mu by IncrBuffered
	failed    error       // the I/O error or corruption that ended this handle
	closed    bool
	writes    int // writes since the last inline sweep batch
	sweepRows int // rows the next sweep batch may delete (sweep.go)

	buf buffer
	bg  background
}

// Open opens the statekit file at path, creating it (mode 0600) if it does
// not exist. Several processes may open, and create, the same file at once.
//
// Open returns ErrNotStatekit for a file that is not a statekit file and
// ErrSchemaTooNew for one written by a newer statekit, leaving the file
// untouched; ErrBusy when another process holds the lock past the busy
// timeout; and a wrapped fs.ErrNotExist for a missing file with WithReadOnly.
func Open(path string, opts ...Option) (*DB, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if path == "" {
		return nil, fmt.Errorf("%w: empty path", ErrInvalidArgument)
	}
	if cfg.clock == nil {
		cfg.clock = sysclock.New()
	}
	db := &DB{path: path, cfg: cfg}
	dsn, err := db.dataSource()
	if err != nil {
		return nil, err
	}
	db.dsn = dsn
	if err := db.open(dsn); err != nil {
		db.releaseHandle()
		return nil, err
	}
	db.buf.deltas = map[string]int64{}
	db.bg.start(db)
	return db, nil
}

// dataSource prepares the file and returns the driver's DSN for it.
func (db *DB) dataSource() (string, error) {
	q := []string{fmt.Sprintf("_pragma=busy_timeout(%d)", db.cfg.busyTimeout.Milliseconds())}
	if db.cfg.readOnly {
		q = append(q, "mode=ro")
	}
	if db.cfg.fs != nil {
		if err := db.checkFSFile(); err != nil {
			return "", err
		}
		name, unregister, err := vfs.Register(db.cfg.fs)
		if err != nil {
			return "", fmt.Errorf("open %s: %w", db.path, err)
		}
		db.unregister = unregister
		db.vfsName = name
		q = append(q, "vfs="+name)
	} else if err := db.prepareFile(); err != nil {
		return "", err
	}
	return "file:" + escapePath(db.path) + "?" + strings.Join(q, "&"), nil
}

// checkFSFile refuses a read-only open of a missing file on an injected FS;
// the FS itself creates new files (MemFS and vfs.OS() with mode 0600).
func (db *DB) checkFSFile() error {
	if !db.cfg.readOnly {
		return nil
	}
	ok, err := db.cfg.fs.Exists(db.path)
	if err == nil && !ok {
		err = fs.ErrNotExist
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", db.path, err)
	}
	return nil
}

// prepareFile creates a missing file with mode 0600 before SQLite sees it
// (SQLite would create it 0644, and gives its -wal and -shm files the main
// file's mode). A read-only open requires the file.
func (db *DB) prepareFile() error {
	if db.cfg.readOnly {
		if _, err := os.Stat(db.path); err != nil {
			return fmt.Errorf("open %s: %w", db.path, err)
		}
		return nil
	}
	f, err := os.OpenFile(db.path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", db.path, err)
	}
	return f.Close()
}

// escapePath makes a file name safe inside a file: URI.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

// open connects, checks or creates the schema, and prepares statements.
func (db *DB) open(dsn string) error {
	ctx := context.Background()
	sqldb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fmt.Errorf("open %s: %w", db.path, err)
	}
	db.sqldb = sqldb
	sqldb.SetMaxOpenConns(1)
	conn, err := sqldb.Conn(ctx)
	if err != nil {
		return openError(ctx, db.path, err)
	}
	db.conn = conn
	kind, err := inspect(ctx, conn, db.path)
	if err != nil {
		return err
	}
	if kind == fileEmpty && db.cfg.readOnly {
		return fmt.Errorf("%w: %s is empty", ErrNotStatekit, db.path)
	}
	if !db.cfg.readOnly {
		if kind == fileEmpty {
			if err := create(ctx, conn, db.path, db.cfg.busyTimeout); err != nil {
				return err
			}
		} else if err := toWAL(ctx, conn, db.cfg.busyTimeout); err != nil {
			return openError(ctx, db.path, err)
		}
		sync := "NORMAL"
		if db.cfg.sync == SyncFull {
			sync = "FULL"
		}
		if _, err := conn.ExecContext(ctx, "PRAGMA synchronous="+sync); err != nil {
			return openError(ctx, db.path, err)
		}
		// SQLite's automatic checkpoint ignores its own errors, a failed
		// sync included: the engine checkpoints itself (checkpoint.go).
		if _, err := conn.ExecContext(ctx, "PRAGMA wal_autocheckpoint=0"); err != nil {
			return openError(ctx, db.path, err)
		}
		if err := checkpointAtOpen(ctx, conn, db.cfg.busyTimeout); err != nil {
			return openError(ctx, db.path, err)
		}
		if err := db.countPages(ctx); err != nil {
			return openError(ctx, db.path, err)
		}
	}
	st, err := prepare(ctx, conn, !db.cfg.bugs.Empty())
	if err != nil {
		return openError(ctx, db.path, err)
	}
	db.st = st
	if err := db.loadHWM(ctx); err != nil {
		return openError(ctx, db.path, err)
	}
	return nil
}

// releaseHandle frees what open acquired. It is safe on a half-opened DB.
func (db *DB) releaseHandle() error {
	var errs []error
	if db.st != nil {
		errs = append(errs, db.st.close())
	}
	if db.conn != nil {
		errs = append(errs, db.conn.Close())
	}
	if db.sqldb != nil {
		errs = append(errs, db.sqldb.Close())
	}
	if db.unregister != nil {
		db.unregister()
	}
	return errors.Join(errs...)
}

// Close flushes buffered increments, stops background work and closes the
// file. Every later call, Close included, returns ErrClosed. Close returns
// the flush's error, if any, after closing anyway.
func (db *DB) Close() error {
	db.bg.stop()
	d, open := db.buf.close()
	if !open {
		return ErrClosed
	}
	flushErr := db.flush(context.Background(), d)
	db.mu.Lock()
	defer db.unlock()
	if db.closed {
		return ErrClosed
	}
	db.closed = true
	foldErr := db.foldHWM(context.Background())
	return errors.Join(flushErr, foldErr, db.releaseHandle())
}

// Path returns the file name the DB was opened with.
func (db *DB) Path() string { return db.path }

// Now returns the engine's time: the larger of the wall clock at open and
// the file's high-water mark, advanced by the monotonic clock since open.
// It is the now every verb uses for deadlines.
func (db *DB) Now() time.Time {
	db.mu.Lock()
	defer db.unlock()
	return time.UnixMilli(db.time.peekMillis())
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
	db.mu.Lock()
	defer db.unlock()
	if err := db.usable(a); err != nil {
		return err
	}
	now, err := db.claimTime(ctx)
	if err != nil {
		return err
	}
	if err := db.note(fn(now)); err != nil {
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
// hold mu.
func (db *DB) claimTime(ctx context.Context) (int64, error) {
	now := db.time.nowMillis()
	if err := db.advanceHWM(ctx, now); err != nil {
		return 0, db.note(err)
	}
	return now, nil
}

// usable reports why the handle cannot run a verb now, or nil. Callers hold mu.
func (db *DB) usable(a access) error {
	switch {
	case db.closed:
		return ErrClosed
	case db.failed != nil:
		return fmt.Errorf("%w: %s: handle failed earlier, reopen the file: %v", ErrIO, db.path, db.failed)
	case a != reading && db.cfg.readOnly:
		return fmt.Errorf("%w: %s was opened read-only", ErrReadOnly, db.path)
	}
	return nil
}

// note ends the handle on a fatal error and returns err. Callers hold mu.
func (db *DB) note(err error) error {
	if err != nil && fatal(err) && db.failed == nil {
		if db.vfsName != "" && errors.Is(err, ErrIO) {
			if cause := vfs.LastError(db.vfsName); cause != nil {
				err = fmt.Errorf("%w (cause: %w)", err, cause)
			}
		}
		db.failed = err
		db.dead.Store(true)
	}
	return err
}
