package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/statekit/statekit/internal/backend"
	"github.com/statekit/statekit/internal/sysclock"
)

// remote is a store other than the file engine behind a *DB: a backend
// package (redisstate) registers an opener for a URL scheme, and Open hands
// it URLs of that scheme. Every public verb validates its arguments first,
// in this package, so a backend sees only arguments the file engine would
// accept, and names its errors (db.named) after the backend answers; a
// backend returns this package's sentinels (ErrNotFound, ErrNotInteger,
// ErrOverflow, a *LeaseHeldError, ErrLeaseLost, ErrBusy, ErrUnavailable,
// ErrOutcomeUnknown, ...) wrapped with what it knows.
//
// TTLs arrive in whole milliseconds: for Set, IncrBy and CAS 0 means none
// was given (Set drops the old deadline, IncrBy and CAS keep it); for Expire
// a ttl of zero or less deletes the key. Lease and Renew get ttl > 0.
type remote interface {
	Get(ctx context.Context, key string) (Value, error)
	Set(ctx context.Context, key string, v Value, ttl int64) error
	Del(ctx context.Context, keys []string) (int, error)
	IncrBy(ctx context.Context, key string, delta, ttl int64) (int64, error)
	// CAS: exp nil means "absent"; nv nil means "delete".
	CAS(ctx context.Context, key string, exp, nv *Value, ttl int64) (bool, error)
	Expire(ctx context.Context, key string, ttl int64) (bool, error)
	TTL(ctx context.Context, key string) (time.Duration, error)
	Lease(ctx context.Context, name, owner string, ttl int64) (*Lease, error)
	Renew(ctx context.Context, l *Lease, ttl int64) error
	Release(ctx context.Context, l *Lease) error

	// Update runs fn once per attempt with a transaction that implements
	// remoteTx, and commits what fn wrote only if fn returns nil.
	Update(ctx context.Context, fn func(tx any) error) error
	// Flush adds deltas to the integers at keys (sorted) with IncrBy's
	// rules and no TTL. dropped names each key whose delta could not be
	// applied (ErrNotInteger, ErrOverflow) or may have been; kept names
	// each key whose delta surely was not applied while others' were (a
	// cluster master that refused its keys), which the next flush may
	// send; the others are written. ran is false only when nothing was
	// written, so the deltas may be kept for the next flush; an error
	// wrapping ErrOutcomeUnknown is taken as written, whatever ran says,
	// since a retry could count it twice.
	Flush(ctx context.Context, keys []string, deltas map[string]int64) (dropped, kept map[string]error, ran bool, err error)
	Sweep(ctx context.Context) (int, error)
	Scan(ctx context.Context, prefix string, includeExpired bool, fn func(KeyInfo) error) error
	Leases(ctx context.Context, includeFree bool, fn func(LeaseInfo) error) error
	Stats(ctx context.Context) (Stats, error)
	Check(ctx context.Context) ([]string, error)
	// Now is the backend's time, the one its deadlines are counted in.
	Now() time.Time
	Close() error
}

// remoteTx is what a remote's Update gives its callback: the verbs with
// validated arguments, at the transaction's own view of the store.
type remoteTx interface {
	Get(key string) (Value, error)
	Set(key string, v Value, ttl int64) error
	Del(keys []string) (int, error)
	IncrBy(key string, delta, ttl int64) (int64, error)
	CAS(key string, exp, nv *Value, ttl int64) (bool, error)
	Expire(key string, ttl int64) (bool, error)
	TTL(key string) (time.Duration, error)
	Lease(name, owner string, ttl int64) (*Lease, error)
	Renew(l *Lease, ttl int64) error
	Release(l *Lease) error
	// Now is the transaction's server time in ms since the epoch, held
	// fixed for the rest of the attempt once asked for.
	Now() (int64, error)
}

// backendPackages names the package a program imports to open each scheme.
var backendPackages = map[string]string{
	"redis":         "github.com/statekit/statekit/redisstate",
	"rediss":        "github.com/statekit/statekit/redisstate",
	"redis+cluster": "github.com/statekit/statekit/redisstate",
}

// urlScheme returns the scheme of a path written as a URL ("redis://..."),
// or "" for a file path.
func urlScheme(path string) string {
	i := strings.Index(path, "://")
	if i <= 0 {
		return ""
	}
	s := path[:i]
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return ""
		}
	}
	return strings.ToLower(s)
}

// openRemote opens a URL through the backend registered for its scheme.
func openRemote(scheme, raw string, cfg config) (*DB, error) {
	name := backend.RedactURL(raw)
	open, ok := backend.Lookup(scheme)
	if !ok {
		if pkg, known := backendPackages[scheme]; known {
			return nil, fmt.Errorf("open %s: %w: the %s:// scheme needs the program to import %q (as _ \"%s\")", name, ErrInvalidArgument, scheme, pkg, pkg)
		}
		return nil, fmt.Errorf("open %s: %w: unknown scheme %q (a file path or one of: %s)", name, ErrInvalidArgument, scheme, strings.Join(knownSchemes(), ", "))
	}
	if err := cfg.remoteOptions(); err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	o := backend.Options{SyncFull: cfg.sync == SyncFull, BusyTimeout: cfg.busyTimeout}
	if cfg.runsBackground() {
		o.FlushInterval = cfg.flushInterval
	}
	r, err := open(raw, o)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	rem, ok := r.(remote)
	if !ok {
		if c, ok := r.(interface{ Close() error }); ok {
			_ = c.Close()
		}
		return nil, fmt.Errorf("open %s: %w: the %s backend does not implement this statekit's verbs (%T)", name, ErrInvalidArgument, scheme, r)
	}
	cfg.clock = sysclock.New() // for the background flusher's waits only
	db := &DB{path: name, cfg: cfg, remote: rem, closeDone: make(chan struct{})}
	db.buf.deltas = map[string]int64{}
	db.bg.start(db)
	return db, nil
}

// knownSchemes lists the schemes Open knows, registered or not.
func knownSchemes() []string {
	seen := map[string]bool{}
	var s []string
	for _, k := range append(backend.Schemes(), "redis", "rediss", "redis+cluster") {
		if !seen[k] {
			seen[k] = true
			s = append(s, k+"://")
		}
	}
	return s
}

// remoteOptions refuses the options that mean something only for a file.
func (c config) remoteOptions() error {
	switch {
	case c.fs != nil:
		return fmt.Errorf("%w: WithFS is for files, not URLs", ErrInvalidArgument)
	case c.readOnly:
		return fmt.Errorf("%w: WithReadOnly is for files, not URLs", ErrInvalidArgument)
	case c.clock != nil:
		return fmt.Errorf("%w: WithClock is for files: a remote store's deadlines follow its server's clock", ErrInvalidArgument)
	}
	return nil
}

// viaRemote runs one verb on the handle's remote store, or returns
// ErrClosed once Close has begun; Close waits for it (remoteCalls).
func viaRemote[T any](db *DB, call func(remote) (T, error)) (T, error) {
	if !db.rcalls.enter() {
		var zero T
		return zero, ErrClosed
	}
	defer db.rcalls.leave()
	return call(db.remote)
}

// remoteList runs Scan or Leases on the remote store. keep wraps each
// error of the caller's callback: that error is returned as it is, not
// named, as the file engine returns it.
func (db *DB) remoteList(verb, subject string, call func(r remote, keep func(error) error) error) error {
	var fnErr error
	keep := func(err error) error {
		if err != nil && fnErr == nil {
			fnErr = err
		}
		return err
	}
	// Not counted in as a verb: Close does not wait for a listing, whose
	// callback may call Close, as it may on a file. A listing Close
	// overtakes ends with ErrClosed; it wrote nothing.
	err := ErrClosed
	if !db.rcalls.begun() {
		err = call(db.remote, keep)
	}
	if fnErr != nil && errors.Is(err, fnErr) {
		return fnErr
	}
	return db.named(verb, subject, err)
}

// expireMillis is Expire's ttl for a remote store: whole milliseconds
// rounded up, or 0 for a ttl of zero or less (which deletes the key).
func expireMillis(ttl time.Duration) int64 {
	ms, err := ttlMillis(ttl)
	if err != nil {
		return 0
	}
	return ms
}

// remoteTrouble reports an error of a remote store's connection, which
// breaks a transaction as an I/O error breaks one on a file.
func remoteTrouble(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOutcomeUnknown)
}

// updateRemote is Update on a remote store: the store runs fn on a
// transaction of its own, as many times as its conflicts need.
func (db *DB) updateRemote(ctx context.Context, fn func(*Tx) error) error {
	var fnErr error // fn's own error, returned as it is
	var last *Tx    // the latest attempt's: the one that committed, if any did
	committed := false
	defer func() {
		// Deferred, so that a callback that left by a panic or
		// runtime.Goexit puts the caller's *Lease back too, as on a file.
		if !committed && last != nil {
			last.rolledBack() // not committed, or not known to be: as it was
		}
	}()
	_, err := viaRemote(db, func(r remote) (struct{}, error) {
		return struct{}{}, r.Update(ctx, func(t any) error {
			rt, ok := t.(remoteTx)
			if !ok {
				return fmt.Errorf("%w: the backend's transaction (%T) lacks this statekit's verbs", ErrInvalidArgument, t)
			}
			if last != nil {
				last.rolledBack() // the attempt before did not commit
			}
			tx := &Tx{db: db, ctx: ctx, rt: rt}
			last = tx
			defer func() { tx.ended = true }()
			if err := fn(tx); err != nil {
				fnErr = err
				return err
			}
			return tx.broken
		})
	})
	committed = err == nil
	if err != nil && fnErr != nil && errors.Is(err, fnErr) {
		return err // the callback's error, or a verb's inside it, named already
	}
	return db.named("update", "", err)
}

// flushRemote is flush on a remote store.
func (db *DB) flushRemote(ctx context.Context, d map[string]int64) error {
	keys := slices.Sorted(maps.Keys(d))
	var dropped, kept map[string]error
	ran := false
	_, err := viaRemote(db, func(r remote) (struct{}, error) {
		var err error
		dropped, kept, ran, err = r.Flush(ctx, keys, d)
		return struct{}{}, err
	})
	if err != nil {
		if !ran && !errors.Is(err, ErrOutcomeUnknown) {
			return notWritten(err) // nothing was applied: kept for the next flush
		}
		return err // applied, or maybe: putting them back could count them twice
	}
	if len(dropped) == 0 && len(kept) == 0 {
		return nil
	}
	fe := &FlushError{Dropped: dropped}
	if len(kept) > 0 {
		fe.Kept = kept
	}
	return fe
}

// closeRemote is Close on a remote store: the last flush, then, once the
// calls in flight have their answers, the client.
func (db *DB) closeRemote() error {
	db.bg.stop(db)
	d, lostErr, flushErr, open := db.lastFlush() // before rcalls.close, which refuses it
	if !open {
		return db.closedAlready()
	}
	defer close(db.closeDone)
	db.rcalls.close()
	return db.closeError(d, nil, lostErr, flushErr, nil, db.remote.Close())
}
