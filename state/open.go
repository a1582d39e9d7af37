package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/statekit/statekit/internal/backend"
	"github.com/statekit/statekit/internal/sysclock"
	"github.com/statekit/statekit/state/vfs"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Open opens the statekit file at path, creating it (mode 0600) if it does
// not exist. Several processes may open, and create, the same file at once.
//
// Open returns ErrNotStatekit for a file that is not a statekit file and
// ErrSchemaTooNew for one written by a newer statekit, leaving the file
// untouched; ErrBusy when another process holds the lock past the busy
// timeout (Open's waits share one, and the WAL repair at open another);
// ErrReadOnly, wrapping the operating system's error, for a file the
// process may not write (WithReadOnly reads it); ErrUnfinishedWrite, with
// WithReadOnly, for a file whose last write was cut short outside its WAL
// (a writable Open rolls it back); ErrCannotOpen, wrapping
// the operating system's error, when it would not open the file or its
// -wal or -shm (a missing directory, or file with WithReadOnly:
// fs.ErrNotExist; a directory: syscall.EISDIR; too many open files:
// syscall.EMFILE).
//
// A path written as a URL opens a store on a server instead of a file:
// "redis://host:port/db?prefix=app:" (also rediss:// and redis+cluster://)
// runs every verb on a Redis server, once the program imports
// github.com/statekit/statekit/redisstate, whose documentation gives the
// URL's parameters and what holds there. Without that import Open returns
// ErrInvalidArgument naming the package, and creates no file. WithFS,
// WithReadOnly and WithClock are for files and refused with a URL;
// WithFlushInterval and WithoutBackground apply; WithSync(SyncFull) makes
// every write check that the server keeps every acknowledged write
// (appendonly yes, appendfsync always, no eviction) and fail with
// ErrNotDurable otherwise; WithBusyTimeout and WithSweepInterval have
// nothing to do there.
func Open(path string, opts ...Option) (*DB, error) {
	scheme := urlScheme(path)
	shown := path // in errors: a URL without its password
	if scheme != "" {
		shown = backend.RedactURL(path)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("open %s: %w: nil Option", shown, ErrInvalidArgument)
		}
		o(&cfg)
	}
	if path == "" {
		return nil, fmt.Errorf("%w: empty path", ErrInvalidArgument)
	}
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("open %s: %w", shown, err)
	}
	if scheme != "" {
		return openRemote(scheme, path, cfg)
	}
	if cfg.clock == nil {
		cfg.clock = sysclock.New()
	}
	db, again, err := openFile(path, cfg)
	if again {
		// Read through a WAL hole whose index every handle has let go of
		// since (holeAtOpen): a fresh Open rebuilds the index from the
		// WAL, and SQLite's recovery stops at the break.
		db, _, err = openFile(path, cfg)
	}
	return db, err
}

// openFile is Open of a file, once. again reports an Open that met damage
// that may be a WAL hole no handle's index counts any more, which one more
// Open would not meet.
func openFile(path string, cfg config) (_ *DB, again bool, _ error) {
	db := &DB{path: path, cfg: cfg, closeDone: make(chan struct{})}
	watchSQLiteLog()
	mark := osLogMark()
	dsn, err := db.dataSource()
	if err != nil {
		return nil, false, err
	}
	db.dsn = dsn
	if db.cfg.fs == nil {
		// Before SQLite reads through a WAL another program damaged
		// (walcheck.go).
		if f := damagedBeforeOpen(path); f != "" {
			db.releaseHandle()
			return nil, false, fmt.Errorf("open %s: %w: %s", path, ErrCorrupt, f)
		}
	}
	// Nor through a WAL that lost frames the index counts (walhole.go).
	if err := holeBeforeOpen(db.cfg.fs, path); err != nil {
		db.releaseHandle()
		return nil, false, fmt.Errorf("open %s: %w", path, err)
	}
	if err := db.openGuard(dsn); err != nil {
		err = db.openCause(err, mark)
		db.releaseHandle()
		again, err := holeAtOpen(db.cfg.fs, path, err)
		return nil, again, err
	}
	if err := db.open(dsn); err != nil {
		err = db.openCause(err, mark)
		db.releaseHandle()
		again, err := holeAtOpen(db.cfg.fs, path, err)
		return nil, again, err
	}
	db.closeGuard()
	if db.cfg.fs == nil {
		db.counted = realPath(path)
		countHandle(db.counted, 1)
	}
	db.buf.deltas = map[string]int64{}
	db.bg.start(db)
	return db, false, nil
}

// dataSource prepares the file and returns the driver's DSN for it.
func (db *DB) dataSource() (string, error) {
	q := []string{fmt.Sprintf("_pragma=busy_timeout(%d)", db.cfg.busyTimeout.Milliseconds())}
	immutable := false
	if db.cfg.readOnly {
		q = append(q, "mode=ro")
		if db.cfg.fs == nil && readOnlyFS(db.path) && !hasWAL(db.path) && !hotJournal(db.path) {
			immutable = true
			// On a read-only file system SQLite can neither create the
			// -wal and -shm files it reads a WAL file with, nor can
			// anyone change the file: it is read as immutable, without
			// them. (A -wal left by a crash must be read: then it is not.
			// Nor is a file with a write cut short outside the WAL:
			// read as immutable, SQLite reads the half-done write.)
			q = append(q, "immutable=1")
		}
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
	} else if err := db.prepareFile(!immutable); err != nil {
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
		return cannotOpen(db.path, err)
	}
	return nil
}

// prepareFile creates a missing file with mode 0600 before SQLite sees it
// (SQLite would create it 0644, and gives its -wal and -shm files the main
// file's mode), and takes the handle's share of the process's descriptor
// of it (dbfile.go), read-only handles too: their connections hold locks
// on the file as well. A read-only open requires the file. With locks (all
// but an immutable read), it asks whether the file system takes locks.
func (db *DB) prepareFile(locks bool) error {
	open := db.openOrCreate
	if db.cfg.readOnly {
		open = func() (*os.File, error) {
			f, err := os.Open(db.path)
			if err != nil {
				return nil, cannotOpen(db.path, err)
			}
			return f, nil
		}
	}
	d, err := acquireDBFile(db.path, open)
	if err != nil {
		return err
	}
	db.file = d
	st, err := d.f.Stat()
	if err != nil {
		return errors.Join(cannotOpen(db.path, err), db.releaseFile())
	}
	if st.IsDir() {
		// A read-only open of a directory succeeds, and SQLite's first
		// read of it fails as an I/O error: say what open(2) says to a
		// writable one.
		return errors.Join(cannotOpen(db.path, &fs.PathError{Op: "open", Path: db.path, Err: syscall.EISDIR}), db.releaseFile())
	}
	var v [1]byte
	if _, err := d.f.ReadAt(v[:], fileFormatOffset); err == nil {
		db.writeVersion = v[0]
	}
	if err := oneByte(db.path, st.Size()); err != nil {
		return errors.Join(err, db.releaseFile())
	}
	if !db.cfg.readOnly {
		// A file this user may not write is refused before SQLite opens
		// it: SQLite would open it for reading and create its -wal and
		// -shm files, owned by this user, which the file's owner could
		// then not open to write.
		if perr := writeProbe(db.path); perr != nil {
			return errors.Join(fmt.Errorf("open %s: %w", db.path, readOnlyError("cannot write it", perr)), db.releaseFile())
		}
	}
	if !locks {
		return nil
	}
	if err := lockProbe(d.f, db.path); err != nil {
		return errors.Join(locksRefused(db.path, err), db.releaseFile())
	}
	return nil
}

// locksRefused is Open's error for a file on a file system that refuses
// POSIX locks (lockProbe): ErrCannotOpen wrapping the failed call, at once,
// where SQLite would retry its lock until the busy timeout and report the
// file busy.
func locksRefused(path string, cause error) error {
	return &causeError{
		msg: fmt.Sprintf("open %s: %v: the file system refuses file locks (%s); statekit's connections and "+
			"processes take turns through POSIX locks on the file: keep it on a file system that has them, "+
			"such as a local disk", path, ErrCannotOpen, osCauseText(cause)),
		errs: []error{ErrCannotOpen, cause},
	}
}

// openOrCreate opens the file at path to read, creating a missing one,
// for acquireDBFile.
func (db *DB) openOrCreate() (*os.File, error) {
	// A missing file is created, but never through a symbolic link: a
	// dangling link could point wherever its author wanted a file made.
	// An existing file reached through a link is opened as usual.
	flags := os.O_RDONLY | os.O_CREATE
	if _, err := os.Stat(db.path); errors.Is(err, fs.ErrNotExist) {
		flags |= os.O_EXCL // O_CREAT|O_EXCL never follows a final symlink
	}
	f, err := os.OpenFile(db.path, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		if fi, lerr := os.Lstat(db.path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("open %s: %w: a symbolic link to a missing file; statekit does not create files through links", db.path, ErrInvalidArgument)
		}
		f, err = os.OpenFile(db.path, os.O_RDONLY, 0) // another process created it just now
	}
	if err != nil {
		return nil, cannotOpen(db.path, err)
	}
	return f, nil
}

// releaseFile releases the handle's share of the process's descriptor of
// the file (dbfile.go), if it holds one.
func (db *DB) releaseFile() error {
	if db.file == nil {
		return nil
	}
	err := db.file.release()
	db.file = nil
	return err
}

// hasWAL reports whether a -wal file with content lies beside path.
func hasWAL(path string) bool {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = path
	}
	st, err := os.Stat(real + walSuffix)
	return err == nil && st.Size() > 0
}

// hotJournal reports whether path has a rollback journal beside it that
// a write cut short may have left: not empty, its header not zeroed (in
// journal_mode=PERSIST SQLite zeroes a finished write's header and keeps
// the file).
func hotJournal(path string) bool {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = path
	}
	f, err := os.Open(real + journalSuffix)
	if err != nil {
		return false
	}
	defer f.Close()
	var first [1]byte
	_, err = f.ReadAt(first[:], 0)
	return err == nil && first[0] != 0
}

// cannotOpen is ErrCannotOpen for a file the operating system would not
// open or create, wrapping its error (an *fs.PathError).
func cannotOpen(path string, err error) error {
	var pe *fs.PathError
	var errno syscall.Errno
	if errors.As(err, &pe) && errors.As(pe.Err, &errno) {
		return &causeError{msg: fmt.Sprintf("open %s: %v: %s", path, ErrCannotOpen, osCauseText(err)), errs: []error{ErrCannotOpen, err}}
	}
	return &causeError{msg: fmt.Sprintf("open %s: %v: %v", path, ErrCannotOpen, err), errs: []error{ErrCannotOpen, err}}
}

// oneByte refuses a file of exactly one byte: SQLite's unix VFS reports
// its size as 0 (a workaround for an old OS X file system), so SQLite would
// take someone's 1-byte file for a new database and write over it.
func oneByte(path string, size int64) error {
	if size == 1 {
		return fmt.Errorf("%w: %s is 1 byte long", ErrNotStatekit, path)
	}
	return nil
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
	// Open's waits for other connections' locks share one budget, as a
	// verb's do (busy.go).
	db.installBusyHandler(conn)
	db.installIndexWatch(conn)
	db.setWait(ctx, 0)
	kind, err := inspect(ctx, conn, db.path)
	if err != nil {
		return err
	}
	if !db.cfg.readOnly && readOnlyFile(conn) {
		return db.cannotWrite()
	}
	if kind == fileEmpty && db.cfg.readOnly {
		return fmt.Errorf("%w: %s is empty", ErrNotStatekit, db.path)
	}
	if !db.cfg.readOnly {
		if kind == fileEmpty {
			if err := create(ctx, conn, db.path, db.cfg); err != nil {
				return err
			}
		} else if err := backToWAL(ctx, conn, db.cfg); err != nil {
			return openError(ctx, db.path, err)
		}
		// NORMAL for SyncFull too: its commits are synced after COMMIT,
		// outside the file's write lock (walsync.go).
		if _, err := conn.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
			return openError(ctx, db.path, err)
		}
		// SQLite's automatic checkpoint ignores its own errors, a failed
		// sync included: the engine checkpoints itself (checkpoint.go).
		if _, err := conn.ExecContext(ctx, "PRAGMA wal_autocheckpoint=0"); err != nil {
			return openError(ctx, db.path, err)
		}
		if db.cfg.runsBackground() {
			if err := db.bg.ckpt.open(ctx, db.dsn); err != nil {
				return openError(ctx, db.path, err)
			}
			if err := db.bg.ckpt.openFile(db.cfg.fs, db.path, db.file); err != nil {
				return cannotOpen(db.path, err)
			}
		}
		if err := db.openWALSyncer(); err != nil {
			return cannotOpen(db.path, err)
		}
		db.syncedPages = -2 // the first commit's sync is owed whatever it wrote
		if err := db.repairWAL(ctx, conn); err != nil {
			// Closing must not checkpoint what the repair left as it was
			// (releaseHandle).
			db.holdWAL(ctx)
			return fmt.Errorf("open %s: %w", db.path, err)
		}
		// The repair may have tried for the whole busy timeout, waiting
		// for readers of older snapshots: what follows has a budget of
		// its own.
		db.setWait(ctx, 0)
		if err := db.checkpointAtOpen(ctx); err != nil {
			return openError(ctx, db.path, err)
		}
		if err := db.countPages(ctx); err != nil {
			return openError(ctx, db.path, err)
		}
	}
	st, err := prepare(ctx, conn, !db.cfg.bugs.Empty(), db.cfg.sweeps != nil)
	if err != nil {
		return openError(ctx, db.path, err)
	}
	db.st = st
	if err := db.loadHWM(ctx); err != nil {
		return openError(ctx, db.path, err)
	}
	db.noteFiles()
	return nil
}

// openGuard checks the file's identity and schema on a read-only
// connection before a writable one opens it, and keeps that connection
// open until Open is done. When the last connection to a file closes,
// SQLite checkpoints the WAL into the file and deletes it, even after Open
// refused the file; a connection that stays open meanwhile prevents that,
// and a read-only one writes nothing into the file when it closes and
// keeps the WAL (keepWAL). So a damaged or foreign file is refused without
// a byte of it changed.
func (db *DB) openGuard(dsn string) error {
	if db.cfg.readOnly {
		return nil
	}
	ctx := context.Background()
	ro, err := sql.Open("sqlite", dsn+"&mode=ro")
	if err != nil {
		return fmt.Errorf("open %s: %w", db.path, err)
	}
	db.guard = ro
	conn, err := ro.Conn(ctx)
	if sqliteCode(err) == sqliteCantOpen {
		return nil // a new file on an injected FS: the writable open creates it
	}
	if err != nil {
		return openError(ctx, db.path, err)
	}
	defer conn.Close()
	if err := keepWAL(conn); err != nil {
		return fmt.Errorf("open %s: %w", db.path, err)
	}
	kind, err := inspect(ctx, conn, db.path)
	if sqliteCode(err) == sqliteReadOnly {
		// A hot journal or a WAL that only a writer may recover: let the
		// writable connection do it.
		db.closeGuard()
		return nil
	}
	if err != nil || kind == fileEmpty {
		return err
	}
	return checkSchema(ctx, conn, db.path)
}

// checkSchema refuses a statekit file whose schema is not exactly the one
// this statekit creates (a damaged schema, or a table, index, trigger or
// view someone added: a trigger would run inside the verbs), and reads the
// meta table, which Open reads next.
func checkSchema(ctx context.Context, conn *sql.Conn, path string) error {
	want, err := wantedSchema()
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	have, err := readSchema(ctx, conn)
	if err != nil {
		return openError(ctx, path, err)
	}
	var f finder
	if !diffSchema(&f, have, want) || len(f.list) > 0 {
		return fmt.Errorf("%w: %s: %s", ErrCorrupt, path, strings.Join(f.list, "; "))
	}
	var rows int64
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM meta`).Scan(&rows); err != nil {
		return openError(ctx, path, err)
	}
	return nil
}

// wantedSchema is expectedSchema, made once.
var wantedSchema = sync.OnceValues(func() (map[string]string, error) {
	return expectedSchema(context.Background())
})

// keepWAL has conn, a read-only guard, keep the WAL file when it closes
// as the file's last connection (SQLITE_FCNTL_PERSIST_WAL). A read-only
// connection cannot copy the WAL into the file, but when the WAL holds
// nothing the file lacks, SQLite's close "checkpoints" it without a write
// and deletes it, and the file need not be durable then: after a failed
// sync of the database file (a checkpoint's, or the page repair's,
// walrepair.go) the WAL's frames are the only durable copy of the pages
// that sync lost, and a power loss after the deletion lost acknowledged
// grants. Kept, the next writable Open repairs from it.
func keepWAL(conn *sql.Conn) error {
	return conn.Raw(func(dc any) error {
		c, ok := dc.(interface {
			FileControlPersistWAL(string, int) (int, error)
		})
		if !ok {
			return fmt.Errorf("the SQLite driver cannot keep the WAL (%T)", dc)
		}
		_, err := c.FileControlPersistWAL("main", 1)
		return err
	})
}

// closeGuard closes the connection openGuard opened, if any.
func (db *DB) closeGuard() {
	if db.guard != nil {
		db.guard.Close()
		db.guard = nil
	}
}

// releaseHandle frees what open acquired. It is safe on a half-opened DB.
func (db *DB) releaseHandle() error {
	var errs []error
	endRead := func() {}
	if db.sqldb != nil || db.bg.ckpt.sqldb != nil {
		// While the writable connections close; an Open that failed
		// before it opened one has none (and where its guard found the
		// file locked, a read would wait its busy timeout once more).
		endRead = db.guardRead()
	}
	if db.st != nil {
		errs = append(errs, db.st.close())
	}
	db.closeWatch()
	if db.conn != nil {
		errs = append(errs, db.conn.Close())
	}
	db.forgetBusyHandler()
	if db.sqldb != nil {
		errs = append(errs, db.sqldb.Close())
	}
	errs = append(errs, db.bg.ckpt.close(), db.closeWALSyncer())
	endRead()
	db.closeGuard()
	if db.counted != "" {
		countHandle(db.counted, -1)
		db.counted = ""
	}
	if db.unregister != nil {
		db.unregister()
	}
	// Last: closing it drops the process's locks on the file when no
	// other handle holds it, so every connection of this one is closed.
	errs = append(errs, db.releaseFile())
	return errors.Join(errs...)
}
