package state

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/statekit/statekit/internal/bugs"
)

const (
	beginSQL    = `BEGIN IMMEDIATE`
	commitSQL   = `COMMIT`
	rollbackSQL = `ROLLBACK`
)

// Tx is a read/write transaction: every verb inside it runs at one engine
// time under the file's write lock (BEGIN IMMEDIATE), and all of it commits
// or none of it does. A Tx is valid only inside its Update callback and is
// not safe for concurrent use.
type Tx struct {
	db      *DB
	ctx     context.Context
	now     int64
	granted bool  // a lease was granted: the commit must be durable
	broken  error // a fatal error inside: the transaction cannot commit
	// trouble is the latest error of a verb inside that the handle must
	// note (note, db.go): a fatal one, a full disk, a busy file.
	trouble error
	rt      remoteTx // the remote store's transaction; nil on a file
	// undo puts back what the transaction changed of the caller's own
	// values (a renewed or released *Lease) if it does not commit.
	undo  []func()
	ended bool // Update returned: the Tx may not be used again
}

// onRollback runs f if the transaction does not commit.
func (tx *Tx) onRollback(f func()) { tx.undo = append(tx.undo, f) }

// rolledBack puts back, newest first, what the transaction changed of the
// caller's values.
func (tx *Tx) rolledBack() {
	for i := len(tx.undo) - 1; i >= 0; i-- {
		tx.undo[i]()
	}
	tx.undo = nil
}

// Update runs fn in a transaction. If fn returns an error, panics or calls
// runtime.Goexit (as t.FailNow does), or a verb inside fails fatally,
// everything it wrote is rolled back and Update returns that error (or
// re-panics). A verb's own error (ErrNotFound,
// ErrNotInteger, ErrLeaseHeld, ...) does not abort the transaction unless fn
// returns it. A verb's ErrIO or ErrCorrupt ends the handle whatever fn
// returns; an error of fn's own that wraps one (another store's) does not.
// When fn returned an error and the handle's sync after the rollback failed
// (with SyncFull, of the high-water mark the time of fn's reads needs),
// Update returns ErrIO wrapping fn's error too.
// On a file, once ctx ends every verb of tx returns its error and does
// nothing, and Update rolls back and returns it. If fn granted a lease, the
// commit is durable before Update returns. A Renew or Release inside moves
// the caller's *Lease at once, and back if the transaction does not commit.
//
// fn must use tx's verbs, never the DB's: on a file, a DB verb called
// inside fn waits for the transaction to end, which waits for fn, so it
// waits until its own context ends (for ever with context.Background), and
// Close called inside fn never returns (Close has no context), nor does the
// Update. Over Redis a DB verb inside fn does not wait: it runs apart from
// the transaction, and a write to a key fn read makes fn run again; code
// that does it hangs when pointed at a file. A Tx kept past its Update
// refuses every verb with ErrInvalidArgument.
//
// On a store opened from a URL (redis://), Update is optimistic: it
// watches what fn reads and commits what fn wrote only if none of it
// changed meanwhile, else runs fn again; fn's error, or a callback that
// wrote nothing, is taken only if what fn read held still too, so fn never
// answers from reads no single moment of the store gave. So fn may run more than once and
// must keep side effects out; after 32 attempts that all conflicted,
// Update returns ErrBusy. The commit is one MULTI/EXEC: if the connection
// fails around it, Update returns ErrOutcomeUnknown.
func (db *DB) Update(ctx context.Context, fn func(tx *Tx) error) error {
	if fn == nil {
		return db.named("update", "", fmt.Errorf("%w: nil Update callback", ErrInvalidArgument))
	}
	if db.remote != nil {
		return db.updateRemote(ctx, fn)
	}
	var fnErr error // fn's own error, returned as it is
	var fnRet error // what the closure returned for it (noted)
	err := db.do(ctx, writing, func(now int64) error {
		if err := db.begin(ctx); err != nil {
			return classify(ctx, err)
		}
		tx := &Tx{db: db, ctx: ctx, now: now}
		committed, returned := false, false
		defer func() {
			tx.ended = true
			if !committed {
				_, _ = db.st.rollback.ExecContext(context.WithoutCancel(ctx))
				tx.rolledBack()
			}
			if !returned && tx.trouble != nil {
				// fn panicked or called runtime.Goexit: do notes
				// nothing, and an I/O error inside still ends the handle.
				_ = db.note(tx.trouble)
			}
		}()
		err := fn(tx)
		returned = true
		if err != nil {
			fnErr, fnRet = err, tx.noted(err)
			return fnRet
		}
		if tx.broken != nil {
			return tx.broken
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("statekit: %w", err)
		}
		if _, err := db.st.commit.ExecContext(ctx); err != nil {
			return classify(ctx, err)
		}
		committed = true
		if !tx.granted || !db.grantNeedsSync() {
			return nil
		}
		// The transaction began NORMAL (synchronous cannot change inside
		// it): its grant is made durable by syncing the WAL (walsync.go).
		return db.syncGrant()
	})
	if fnErr != nil {
		if errors.Is(err, fnErr) {
			return err // a verb's error, named already and noted
		}
		if err != nil && !errors.Is(err, fnRet) && fnRet != errCallback {
			// A verb's fatal error, which the handle's note explained
			// into one that does not wrap it: a read through a WAL that
			// lost frames is ErrIO, not the corruption SQLite took it for.
			return db.named("update", "", err)
		}
		if err != nil && !errors.Is(err, fnRet) {
			// fn's writes rolled back, but the sync after them failed
			// (SyncFull: the high-water mark covering the time fn's reads
			// used), which ended the handle: that time may not survive,
			// so the call failed as a read whose sync fails does.
			return db.named("update", "", &causeError{
				msg:  fmt.Sprintf("%v (the callback had returned: %v)", err, fnErr),
				errs: []error{err, fnErr},
			})
		}
		return fnErr // the callback's own, as it is
	}
	return db.named("update", "", err)
}

// errCallback stands, for note, for an error of the callback's own: note
// must not take an error from elsewhere (another store's ErrIO) for one of
// the handle's statements.
var errCallback = errors.New("statekit: the Update callback returned an error")

// noted returns what the handle must note (DB.note) once the callback
// returned fnErr: fnErr itself when it is a verb's error from inside,
// else the trouble a verb inside met, so that a fatal one ends the handle
// whatever the callback returned, else errCallback.
func (tx *Tx) noted(fnErr error) error {
	switch {
	case tx.trouble != nil && errors.Is(fnErr, tx.trouble):
		return fnErr
	case tx.trouble != nil:
		return tx.trouble
	}
	return errCallback
}

// Now returns the engine time the transaction runs at: every verb inside it
// reads and writes at this one time, so an expiry it sees and a deadline it
// counts are both counted from Now. A decision that depends on the time
// (which window a rate limit counts in) should read it here, not from
// DB.Now before Update, which may run later than that.
//
// On a store opened from a URL it is the server's time of the attempt's
// first read (or one it asks for), held fixed for the rest of the attempt;
// in a Redis Cluster the transaction must touch a key first, since each
// master keeps its own time.
func (tx *Tx) Now() (time.Time, error) {
	if err := tx.usable(); err != nil {
		return time.Time{}, tx.named("now", "", err)
	}
	if tx.rt == nil {
		return time.UnixMilli(tx.now), nil
	}
	ms, err := tx.rt.Now()
	if err != nil {
		return time.Time{}, tx.named("now", "", tx.run(err))
	}
	return time.UnixMilli(ms), nil
}

// run runs one verb inside the transaction and remembers a fatal error,
// and the trouble the handle must note when Update ends.
func (tx *Tx) run(err error) error {
	if err == nil && tx.rt == nil && tx.db.cfg.bugs.Has(bugs.UpdateCommitsEach) {
		err = tx.bugCommitEach()
	}
	if err != nil && (fatal(err) || errors.Is(err, ErrDiskFull) || errors.Is(err, ErrBusy)) {
		tx.trouble = err
	}
	if err != nil && (fatal(err) || remoteTrouble(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && tx.broken == nil {
		tx.broken = err
	}
	if err != nil && tx.broken == nil && tx.rt == nil && tx.db.autocommit() {
		// SQLite rolled the whole transaction back (a full disk, a
		// lock it could not get): a later verb would run on its own,
		// outside it, and be written whatever Update returns.
		tx.broken = fmt.Errorf("%w (SQLite rolled the transaction back)", err)
	}
	return err
}

// named is DB.named for a verb inside the transaction.
func (tx *Tx) named(verb, subject string, err error) error {
	return tx.db.named(verb, subject, err)
}

// usable refuses verbs after a fatal error inside the transaction, after
// its Update returned, and, on a file, once Update's context ended (as the
// DB's verbs do): the transaction cannot commit then, so it breaks.
func (tx *Tx) usable() error {
	if tx.ended {
		return fmt.Errorf("%w: the transaction has ended: a Tx is valid only inside its Update callback", ErrInvalidArgument)
	}
	if tx.broken != nil {
		return fmt.Errorf("statekit: transaction failed earlier: %w", tx.broken)
	}
	if err := tx.ctx.Err(); err != nil && tx.rt == nil {
		return tx.run(fmt.Errorf("statekit: %w", err))
	}
	return nil
}

// Get is DB.Get inside the transaction.
func (tx *Tx) Get(key string) (Value, error) {
	if err := firstErr(tx.usable(), checkKey("key", key)); err != nil {
		return Value{}, tx.named("get", keyName(key), err)
	}
	v, err := tx.get(key)
	return v, tx.named("get", keyName(key), tx.run(err))
}

// Set is DB.Set inside the transaction.
func (tx *Tx) Set(key string, value any, opts ...WriteOption) error {
	if err := tx.usable(); err != nil {
		return tx.named("set", keyName(key), err)
	}
	v, ttl, err := checkSet(key, value, opts)
	if err != nil {
		return tx.named("set", keyName(key), err)
	}
	return tx.named("set", keyName(key), tx.run(tx.set(key, v, ttl)))
}

// Del is DB.Del inside the transaction.
func (tx *Tx) Del(keys ...string) (int, error) {
	if err := firstErr(tx.usable(), checkKeys(keys)); err != nil {
		return 0, tx.named("del", keysName(keys), err)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	n, err := tx.del(keys)
	return n, tx.named("del", keysName(keys), tx.run(err))
}

// Incr is DB.Incr inside the transaction.
func (tx *Tx) Incr(key string, opts ...WriteOption) (int64, error) {
	return tx.incrVerb("incr", key, 1, opts)
}

// Decr is DB.Decr inside the transaction: it subtracts 1, as IncrBy with
// -1, and returns ErrNotInteger or ErrOverflow as Incr does.
func (tx *Tx) Decr(key string, opts ...WriteOption) (int64, error) {
	return tx.incrVerb("decr", key, -1, opts)
}

// DecrBy is DB.DecrBy inside the transaction: it subtracts delta, as IncrBy
// with -delta, and returns ErrNotInteger or ErrOverflow as Incr does. A
// delta of math.MinInt64 gives ErrOverflow.
func (tx *Tx) DecrBy(key string, delta int64, opts ...WriteOption) (int64, error) {
	if delta == math.MinInt64 {
		// As DB.DecrBy: the other checks first, then the overflow.
		if _, err := checkIncr(key, opts); err != nil {
			return 0, tx.named("decr", keyName(key), err)
		}
		return 0, tx.named("decr", keyName(key), firstErr(tx.usable(), ErrOverflow))
	}
	return tx.incrVerb("decr", key, -delta, opts)
}

// IncrBy is DB.IncrBy inside the transaction.
func (tx *Tx) IncrBy(key string, delta int64, opts ...WriteOption) (int64, error) {
	return tx.incrVerb("incr", key, delta, opts)
}

// incrVerb is the increment verbs, errors named after verb.
func (tx *Tx) incrVerb(verb, key string, delta int64, opts []WriteOption) (int64, error) {
	if err := tx.usable(); err != nil {
		return 0, tx.named(verb, keyName(key), err)
	}
	ttl, err := checkIncr(key, opts)
	if err != nil {
		return 0, tx.named(verb, keyName(key), err)
	}
	n, err := tx.incrBy(key, delta, ttl)
	return n, tx.named(verb, keyName(key), tx.run(err))
}

// CAS is DB.CAS inside the transaction, with its write options.
func (tx *Tx) CAS(key string, expected, new any, opts ...WriteOption) (bool, error) {
	if err := tx.usable(); err != nil {
		return false, tx.named("cas", keyName(key), err)
	}
	exp, nv, ttl, err := checkCAS(key, expected, new, opts)
	if err != nil {
		return false, tx.named("cas", keyName(key), err)
	}
	ok, err := tx.cas(key, exp, nv, ttl)
	return ok, tx.named("cas", keyName(key), tx.run(err))
}

// Expire is DB.Expire inside the transaction.
func (tx *Tx) Expire(key string, ttl time.Duration) (bool, error) {
	if err := firstErr(tx.usable(), checkKey("key", key)); err != nil {
		return false, tx.named("expire", keyName(key), err)
	}
	ok, err := tx.expire(key, ttl)
	return ok, tx.named("expire", keyName(key), tx.run(err))
}

// TTL is DB.TTL inside the transaction.
func (tx *Tx) TTL(key string) (time.Duration, error) {
	if err := firstErr(tx.usable(), checkKey("key", key)); err != nil {
		return 0, tx.named("ttl", keyName(key), err)
	}
	d, err := tx.ttl(key)
	return d, tx.named("ttl", keyName(key), tx.run(err))
}

// Lease is DB.Lease inside the transaction. The grant commits with the
// transaction, and Update makes that commit durable before it returns. If
// the transaction does not commit, the grant never happened and its token
// will be granted again: use the *Lease only once Update returned nil.
func (tx *Tx) Lease(name, owner string, ttl time.Duration) (*Lease, error) {
	if err := tx.usable(); err != nil {
		return nil, tx.named("lease", keyName(name), err)
	}
	ms, err := checkLease(name, owner, ttl)
	if err != nil {
		return nil, tx.named("lease", keyName(name), err)
	}
	l, err := tx.lease(name, owner, ms)
	if err == nil {
		tx.granted = true
	}
	return l, tx.named("lease", keyName(name), tx.run(err))
}

// Renew is DB.Renew inside the transaction.
func (tx *Tx) Renew(l *Lease, ttl time.Duration) error {
	if err := tx.usable(); err != nil {
		return tx.named("renew", leaseName(l), err)
	}
	ms, err := checkHeld(l, ttl)
	if err != nil {
		return tx.named("renew", leaseName(l), err)
	}
	// The caller's lease moves now, for the rest of the callback, and
	// back if the transaction does not commit.
	was := *l
	subject := leaseName(l) // before renew can change the token
	if err := tx.renew(l, ms); err != nil {
		return tx.named("renew", subject, tx.run(err))
	}
	tx.onRollback(func() { *l = was })
	return nil
}

// Release is DB.Release inside the transaction.
func (tx *Tx) Release(l *Lease) error {
	if err := tx.usable(); err != nil {
		return tx.named("release", leaseName(l), err)
	}
	if _, err := checkHeld(l, time.Millisecond); err != nil {
		return tx.named("release", leaseName(l), err)
	}
	was := *l // as Renew: back if the transaction does not commit
	if err := tx.release(l); err != nil {
		return tx.named("release", leaseName(l), tx.run(err))
	}
	tx.onRollback(func() { *l = was })
	return nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
