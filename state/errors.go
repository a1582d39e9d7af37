package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/statekit/statekit/state/vfs"
	sqlite "modernc.org/sqlite"
)

// Sentinel errors. Check them with errors.Is: returned errors wrap them with
// the key, file or cause that triggered them.
var (
	// ErrNotFound is returned by Get and TTL when the key is absent or its
	// deadline has passed.
	ErrNotFound = errors.New("statekit: key not found")
	// ErrNotInteger is returned by Incr, IncrBy, Decr, DecrBy and Flush when
	// the live value is bytes, not an integer. The stored value is unchanged.
	ErrNotInteger = errors.New("statekit: value is not an integer")
	// ErrOverflow is returned by the increment verbs when the result would
	// fall outside int64. The stored value is unchanged.
	ErrOverflow = errors.New("statekit: increment or decrement would overflow")
	// ErrLeaseHeld is returned by Lease when another owner holds a live
	// lease of that name. The error is a *LeaseHeldError naming the holder.
	ErrLeaseHeld = errors.New("statekit: lease held by another owner")
	// ErrLeaseLost is returned by Renew and Release when the lease has
	// expired, was released, or a newer token was granted.
	ErrLeaseLost = errors.New("statekit: lease lost")
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("statekit: database is closed")
	// ErrInvalidKey is returned when a key or lease name is empty, longer
	// than MaxKeyBytes, not valid UTF-8, or contains a NUL byte.
	ErrInvalidKey = errors.New("statekit: invalid key")
	// ErrInvalidValue is returned when a value has an unsupported type or is
	// longer than MaxValueBytes.
	ErrInvalidValue = errors.New("statekit: invalid value")
	// ErrInvalidTTL is returned when a TTL option or a lease ttl is zero or
	// negative.
	ErrInvalidTTL = errors.New("statekit: invalid ttl")
	// ErrInvalidArgument is returned for other bad input: an empty or
	// over-long lease owner, a nil *Lease, a nil Update callback.
	ErrInvalidArgument = errors.New("statekit: invalid argument")
	// ErrNotStatekit is returned by Open when the file exists but is not a
	// statekit file (another SQLite database, a text file). The file is left
	// untouched.
	ErrNotStatekit = errors.New("statekit: not a statekit file")
	// ErrSchemaTooNew is returned by Open when the file was written by a
	// newer statekit with a schema version this one does not know.
	ErrSchemaTooNew = errors.New("statekit: schema version is newer than this statekit")
	// ErrBusy is returned when another connection (another process, or
	// another handle on the same file) held the file's lock for longer than
	// the verb's busy timeout allowed (WithBusyTimeout), counting what the
	// verb waited behind other verbs and background work of the handle;
	// or when SQLite could not take a read lock on the WAL index in its own
	// retries (about 10 s).
	ErrBusy = errors.New("statekit: database is busy")
	// ErrReadOnly is returned by write verbs on a handle opened WithReadOnly;
	// by Open when the file, its directory or its file system cannot be
	// written (the file is 0400, owned by another user, or on a read-only
	// mount); and by a write that the file system refused because it became
	// read-only or the permission went away. The last two wrap the
	// operating system's error (errors.Is(err, fs.ErrPermission) for EACCES
	// and EPERM, errors.Is(err, syscall.EROFS) for a read-only file system)
	// and say how to read the file anyway (WithReadOnly). A refused write
	// also ends the handle, as ErrIO does, and wraps ErrIO.
	ErrReadOnly = errors.New("statekit: database is read-only")
	// ErrUnfinishedWrite is returned by Open WithReadOnly when a write to
	// the file was cut short (by a crash or a power loss) outside its WAL:
	// the rollback journal beside it (FILE-journal) holds pages that must be
	// put back before the file can be read, and only a connection that may
	// write can put them back. A writable Open does it. statekit writes that
	// way only to put a file in WAL mode (when it creates one, or switches
	// back one another program switched out of WAL mode); another program
	// can, having switched the file out of WAL mode. On a
	// file system mounted read-only it wraps syscall.EROFS: mount it
	// writable first.
	ErrUnfinishedWrite = errors.New("statekit: a write cut short must be rolled back first")
	// ErrCannotOpen is returned by Open when the operating system would not
	// open the file or the -wal or -shm file beside it: too many open files,
	// a missing directory, a file it may not read. It wraps the operating
	// system's error, so errors.Is(err, syscall.EMFILE) or
	// errors.Is(err, fs.ErrNotExist) tell which.
	ErrCannotOpen = errors.New("statekit: cannot open the file")
	// ErrIO is returned when the file system failed a read, write or sync,
	// or stopped granting locks on the file under the open handle (wraps
	// syscall.ENOLCK: a network file system's lock service stopped). It
	// wraps the operating system's error when SQLite reported one
	// (errors.Is(err, syscall.EIO)). The handle then refuses every further
	// call with ErrIO: the failed write is never retried as if nothing
	// happened. Reopen the file to recover the last committed state. A
	// write that returned ErrIO may have taken effect (SQLite can have
	// written its whole commit to the WAL before the failure, and the
	// reopened file then has it): read it back after reopening.
	ErrIO = errors.New("statekit: I/O error")
	// ErrDiskFull is returned when the disk has no room for a write: it is
	// full (ENOSPC), the disk quota is spent (wraps syscall.EDQUOT), or the
	// file reached the largest size it may have (wraps syscall.EFBIG: the
	// process's RLIMIT_FSIZE or the file system's largest file). The
	// failed transaction leaves nothing behind and the handle stays usable;
	// the refusal asks for a checkpoint that empties the WAL into the file,
	// so writes that need no new room in it go on soon after.
	ErrDiskFull = errors.New("statekit: disk full")
	// ErrCorrupt is returned when the file's content is damaged, or when
	// another program damaged the -wal or -shm file beside it (see
	// DB.Check). The handle then refuses every further call, as with ErrIO.
	// A read the disk failed is ErrIO, though SQLite reports it as
	// corruption.
	ErrCorrupt = errors.New("statekit: file is corrupt")

	// ErrUnavailable is returned by a store opened from a URL (redis://)
	// when its server could not be reached, refused the connection or the
	// credentials, or is loading: the verb was not applied. It wraps the
	// client's error, which names the address.
	ErrUnavailable = errors.New("statekit: server unavailable")
	// ErrOutcomeUnknown is returned by a store opened from a URL when the
	// connection failed after the verb was sent: the server may or may not
	// have applied it. A retry of Set, Del, CAS or a lease call by the same
	// owner is safe; a retry of Incr may count twice. A retried CAS answers
	// for the store as the retry finds it: after a first try that swapped,
	// it reports false (CAS(ctx, k, nil, v) finds k taken, by its own first
	// try), so read the key back to tell.
	ErrOutcomeUnknown = errors.New("statekit: outcome unknown")
	// ErrBackgroundFlush marks, in what Flush or Close returns, the error
	// of an earlier background flush of IncrBuffered's deltas, which had no
	// caller to return it to: it names the keys and deltas it dropped, or
	// whose outcome is unknown. It says nothing of the call's own flush.
	ErrBackgroundFlush = errors.New("statekit: a background flush")
	// ErrNotDurable is returned by Lease on a store that may lose an
	// acknowledged write (a Redis server without appendonly yes and
	// appendfsync always, or one that evicts keys to make room): there, a
	// restart or an eviction could hand a fencing token out twice. The
	// URL's allow_unsafe_leases=true parameter opts out. On a store opened
	// with WithSync(SyncFull) every write verb returns it on such a server,
	// whatever the URL says; nothing was written, unless the error also
	// wraps ErrOutcomeUnknown (the write ran before a check made again
	// after it, over a connection opened since the last one).
	ErrNotDurable = errors.New("statekit: store does not keep every acknowledged write")
)

// LeaseHeldError is the error Lease returns when another owner holds the
// lease. It wraps ErrLeaseHeld.
type LeaseHeldError struct {
	Name    string        // lease name
	Owner   string        // the current holder
	Expires time.Time     // when the holder's lease ends unless renewed
	Left    time.Duration // how long until Expires, at the time of the refusal
}

// Error describes the holder and the time left.
func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("statekit: lease %q held by %q for %v more", e.Name, e.Owner, e.Left)
}

// Unwrap returns ErrLeaseHeld.
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// Markers that SQL raises through statekit_raise, turned back into sentinels.
const (
	raiseNotInteger = "statekit-not-integer"
	raiseOverflow   = "statekit-overflow"
)

// SQLite primary result codes the engine tells apart.
const (
	sqliteError     = 1
	sqliteReadOnly  = 8
	sqliteBusy      = 5
	sqliteLocked    = 6
	sqliteInterrupt = 9
	sqliteIOErr     = 10
	sqliteCorrupt   = 11
	sqliteFull      = 13
	sqliteCantOpen  = 14
	sqliteProtocol  = 15 // a WAL read lock not had after many tries
	sqliteNotADB    = 26

	// sqliteReadOnlyRollback is SQLITE_READONLY_ROLLBACK: a read-only
	// connection found a hot rollback journal.
	sqliteReadOnlyRollback = sqliteReadOnly | 3<<8
	// sqliteIOErrShmMap is SQLITE_IOERR_SHMMAP: mmap of the -shm file
	// failed.
	sqliteIOErrShmMap = sqliteIOErr | 21<<8
	// sqliteIOErrShmSize is SQLITE_IOERR_SHMSIZE: the -shm file could not
	// grow.
	sqliteIOErrShmSize = sqliteIOErr | 19<<8
	// sqliteIOErrLock is SQLITE_IOERR_LOCK: a lock call failed other than
	// for another connection's lock.
	sqliteIOErrLock = sqliteIOErr | 15<<8
	// shmSuffix names the shared-memory index beside the file.
	shmSuffix = "-shm"
)

// classify turns a driver error into one that wraps the right sentinel.
// It returns nil for nil. Once ctx has ended it returns ctx's error (the
// busy handler stops waiting then, busy.go), except for what the statement
// itself met, which a statement run to its end meets whatever its context
// does (driverstmt.go): an I/O error or corruption (the outcome is unknown
// and the handle must end) and a full disk (the refused write must be cut
// back: walfull.go).
func classify(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	err = classifyCause(err)
	if ctxErr := ctx.Err(); ctxErr != nil && !fatal(err) && !errors.Is(err, ErrDiskFull) {
		return fmt.Errorf("statekit: %w", ctxErr)
	}
	return err
}

// classifyCause is classify for a verb whose context has not ended.
func classifyCause(err error) error {
	if classified(err) {
		return err
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, raiseNotInteger):
		return ErrNotInteger
	case strings.Contains(msg, raiseOverflow):
		return ErrOverflow
	}
	if errors.As(err, new(*roomError)) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err) // noroom.go
	}
	switch sqliteCode(err) {
	case sqliteBusy, sqliteLocked, sqliteProtocol:
		return fmt.Errorf("%w: %w", ErrBusy, err)
	case sqliteFull:
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	case sqliteIOErr:
		return fmt.Errorf("%w: %w", ErrIO, err)
	case sqliteCorrupt, sqliteNotADB:
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	case sqliteReadOnly:
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	case sqliteInterrupt:
		return fmt.Errorf("statekit: interrupted: %w", context.Canceled)
	}
	return err
}

// classified reports whether err wraps a sentinel classify gives already.
func classified(err error) bool {
	for _, s := range []error{ErrBusy, ErrDiskFull, ErrIO, ErrCorrupt, ErrReadOnly, ErrNotInteger, ErrOverflow} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// osCallFailed reports whether err is an SQLite I/O error that a failed
// system call caused (a read, write, sync, truncate, stat, lock, or the
// shared memory's open or map), so that the errno SQLite keeps is that
// call's. A short read, for one, sets no errno: what the connection keeps
// then is an older call's.
func osCallFailed(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqliteIOErr {
		return false
	}
	switch se.Code() >> 8 {
	case 1, // READ
		3,  // WRITE
		4,  // FSYNC
		5,  // DIR_FSYNC
		6,  // TRUNCATE
		7,  // FSTAT
		8,  // UNLOCK
		9,  // RDLOCK
		10, // DELETE
		13, // ACCESS
		15, // LOCK
		16, // CLOSE
		18, // SHMOPEN
		19, // SHMSIZE
		21, // SHMMAP
		24: // MMAP
		return true
	}
	return false
}

// sqliteCode returns the primary SQLite result code in err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// sqliteExtendedCode returns the extended result code of the SQLite error
// in err's chain, or 0 when there is none.
func sqliteExtendedCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// fatal reports whether err leaves the handle unusable: after an I/O error
// or corruption the engine never carries on as if nothing happened.
func fatal(err error) bool {
	return errors.Is(err, ErrIO) || errors.Is(err, ErrCorrupt)
}

// explain adds to a classified error what the engine can learn of its
// cause, once: for an I/O error, the operating system's error SQLite saw on
// conn (or, through WithFS, the error the FS returned); a write the file
// system refused for being read-only or for lack of permission is then an
// ErrReadOnly too. A corruption that is a read the disk failed is an ErrIO
// wrapping the errno instead. Callers hold mu, right after the failed
// statement.
func (db *DB) explain(conn *sql.Conn, err error) error {
	if err == nil || explained(err) {
		return err
	}
	if code := sqliteCode(err); (code == sqliteCorrupt || code == sqliteNotADB) && conn != nil {
		// Read through a WAL that lost frames its index counts: an
		// I/O error, not damage (walhole.go).
		if hole := db.holeBehind(conn); hole != nil {
			return &causeError{msg: fmt.Sprintf("%v (SQLite read it as %q)", hole, sqliteText(err)), errs: []error{hole}}
		}
		// Read through pages a failed sync took back, which a handle found
		// and marked the index for (indexforget.go): the file is sound.
		if indexMarked(conn) {
			return &causeError{msg: fmt.Sprintf("%v: %s: a read went through writes the file system took back after a sync "+
				"failed (another handle found the loss and marked the shared index for rebuilding); reopen the file "+
				"(SQLite read it as %q)", ErrIO, db.path, sqliteText(err)), errs: []error{ErrIO}}
		}
	}
	switch {
	case errors.Is(err, ErrIO):
		var cause error
		if db.vfsName != "" {
			cause = vfs.LastError(db.vfsName)
		} else if !osCallFailed(err) {
			return err
		} else if errno := systemErrno(conn); errno != 0 {
			cause = errno
		}
		var errno syscall.Errno
		switch {
		case cause == nil:
			return err
		case errors.As(cause, &errno) && refusesWrites(errno):
			return &causeError{
				msg: fmt.Sprintf("%v: the file system refused a write: %s; the handle has ended: "+
					"to read the file, open it again WithReadOnly (%v)", ErrReadOnly, errnoText(errno), err),
				errs: []error{ErrReadOnly, err, cause},
			}
		case errors.As(cause, &errno):
			return &causeError{msg: fmt.Sprintf("%v (cause: %s)", err, errnoText(errno)), errs: []error{err, cause}}
		}
		return &causeError{msg: fmt.Sprintf("%v (cause: %v)", err, cause), errs: []error{err, cause}}
	case errors.Is(err, ErrCorrupt) && sqliteCode(err) == sqliteCorrupt && db.vfsName == "":
		// A read the disk failed, which SQLite calls corruption
		// (readerrno.go); else damage, as SQLite says.
		errno := readErrno(conn)
		if errno == 0 {
			return err
		}
		return &causeError{
			msg: fmt.Sprintf("%v: a read of the file failed: %s; SQLite reports it as %q, but the failed read is "+
				"the cause: the file may be sound once the disk answers again", ErrIO, errnoText(errno), sqliteText(err)),
			errs: []error{ErrIO, errno},
		}
	case errors.Is(err, ErrBusy) && (sqliteCode(err) == sqliteBusy || sqliteCode(err) == sqliteLocked ||
		sqliteCode(err) == sqliteProtocol):
		if lost := db.locksLost(); lost != nil {
			return lost // locklost.go
		}
		if sqliteCode(err) == sqliteProtocol {
			return &causeError{
				msg: fmt.Sprintf("%v: SQLite could not take a read lock on the WAL index in many tries over about "+
					"10 s (other connections kept changing the index or holding its locks)", ErrBusy),
				errs: []error{err},
			}
		}
		return &causeError{
			msg: fmt.Sprintf("%v: another connection held the file's lock past the busy timeout (%v, counted from the call)",
				ErrBusy, db.cfg.busyTimeout),
			errs: []error{err},
		}
	case errors.Is(err, ErrDiskFull) && db.roomSpent(err) == syscall.EFBIG:
		return &causeError{
			msg: fmt.Sprintf("%v: no room for this write: %s: %s",
				ErrDiskFull, roomText(syscall.EFBIG), errnoText(syscall.EFBIG)),
			errs: []error{err, syscall.EFBIG},
		}
	case errors.Is(err, ErrDiskFull) && db.roomSpent(err) == syscall.EDQUOT:
		return &causeError{
			msg: fmt.Sprintf("%v: no room for this write on the file system holding the file: %s",
				ErrDiskFull, errnoText(syscall.EDQUOT)),
			errs: []error{err, syscall.EDQUOT},
		}
	case errors.Is(err, ErrDiskFull):
		return &causeError{
			msg:  fmt.Sprintf("%v: no room for this write on the file system holding the file", ErrDiskFull),
			errs: []error{err},
		}
	}
	return err
}

// named names the file, the verb and what it concerns (a key, a lease) in
// an error a public method returns: "app.state: incr "hits": ...".
func (db *DB) named(verb, subject string, err error) error {
	if err == nil {
		return nil
	}
	if subject != "" {
		verb += " " + subject
	}
	return fmt.Errorf("%s: %s: %w", db.path, verb, err)
}

// namedKey is named with the key quoted as keyName quotes it, quoted only
// when err is not nil: a verb's success path builds no message.
func (db *DB) namedKey(verb, key string, err error) error {
	if err == nil {
		return nil
	}
	return db.named(verb, keyName(key), err)
}

// keyName quotes a key for an error message, cut short if long.
func keyName(key string) string {
	const max = 64
	if len(key) > max {
		return strconv.Quote(key[:max]) + "..."
	}
	return strconv.Quote(key)
}

// keysName names the keys of a Del for an error message.
func keysName(keys []string) string {
	const max = 3
	names := make([]string, 0, max)
	for i, k := range keys {
		if i == max {
			return strings.Join(names, ", ") + fmt.Sprintf(" and %d more", len(keys)-max)
		}
		names = append(names, keyName(k))
	}
	return strings.Join(names, ", ")
}

// leaseName names a lease for an error message, with its token once granted.
func leaseName(l *Lease) string {
	if l == nil {
		return ""
	}
	return fmt.Sprintf("%s token %d", keyName(l.Name), l.Token)
}
