package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/statekit/statekit/internal/bugs"
	sqlite "modernc.org/sqlite"
)

const (
	// leaseGrantSQL grants a free lease (never granted, expired or
	// released: expires_at <= now) with the next token, or extends a live
	// lease of the same owner keeping its token, and then tells the
	// engine so through statekit_extended with ?5, the grant's number
	// (extended.go). A live lease of another owner matches no row. ?4 is
	// now.
	leaseGrantSQL = `INSERT INTO leases(name, owner, token, expires_at) VALUES (?1, ?2, 1, ?3)
ON CONFLICT(name) DO UPDATE SET
	token = CASE WHEN leases.expires_at > ?4 THEN statekit_extended(?5, leases.token) ELSE leases.token + 1 END,
	owner = excluded.owner,
	expires_at = excluded.expires_at
WHERE leases.expires_at <= ?4 OR leases.owner = excluded.owner
RETURNING token`
	// leaseGetSQL reads a lease row, live or not.
	leaseGetSQL = `SELECT owner, token, expires_at FROM leases WHERE name = ?1`
	// renewSQL extends a live lease that still has this owner and token.
	renewSQL = `UPDATE leases SET expires_at = ?4
WHERE name = ?1 AND owner = ?2 AND token = ?3 AND expires_at > ?5
RETURNING token`
	// releaseSQL ends a live lease and keeps its row and token, so the next
	// grant gets a higher token.
	releaseSQL = `UPDATE leases SET expires_at = 0
WHERE name = ?1 AND owner = ?2 AND token = ?3 AND expires_at > ?4
RETURNING 1`
)

// Lease is a granted lease. Token is its fencing token: a resource the
// holder writes must reject any token lower than one it has seen, since a
// holder that paused past Expires may still write.
type Lease struct {
	Name    string    // the lease's name
	Owner   string    // who holds it
	Token   int64     // fencing token: higher than every token granted before under Name
	Expires time.Time // when it ends unless renewed, in the engine's time
	// Extended is set on a Lease returned by a grant that found the lease
	// live and held by the same owner: it kept its token and moved its
	// deadline (a retry, or another copy that passes the same owner). It
	// is false for a new grant, whose token is new.
	Extended bool
}

// Lease grants the lease name to owner for ttl and returns it with its
// fencing token. A free name (never granted, expired or released) gets the
// last token + 1, starting at 1. The same owner asking again while its lease
// is live gets the same lease and token with the deadline moved to now+ttl,
// so a retry after a lost reply is safe; its Lease has Extended set. An
// owner therefore names one holder: two copies of a job that pass the same
// owner both get the lease, with the same token, so each copy needs an
// owner of its own (statectl run's default is HOST:PID), or a copy whose
// first grant comes back Extended must take it for another copy's lease
// and back off, as statectl run does. A grant is durable before Lease returns (the
// engine syncs the WAL after its COMMIT), so a power loss never hands a
// token out twice.
//
// Lease returns a *LeaseHeldError wrapping ErrLeaseHeld when another owner
// holds it, ErrInvalidKey for a bad name, ErrInvalidArgument for a bad owner
// and ErrInvalidTTL for a ttl of zero or less.
func (db *DB) Lease(ctx context.Context, name, owner string, ttl time.Duration) (*Lease, error) {
	ms, err := checkLease(name, owner, ttl)
	if err != nil {
		return nil, db.namedKey("lease", name, err)
	}
	if db.remote != nil {
		l, err := viaRemote(db, func(r remote) (*Lease, error) { return r.Lease(ctx, name, owner, ms) })
		return l, db.namedKey("lease", name, err)
	}
	var l *Lease
	grant := func(now int64) (err error) {
		l, err = db.lease(ctx, now, name, owner, ms)
		return err
	}
	if db.cfg.bugs.Has(bugs.LeaseTwoStatements) {
		// The planted two-statement grant runs alone, in autocommit: a
		// group's transaction would make its two statements one.
		err = db.do(ctx, writing, func(now int64) error {
			return db.grantAlone(ctx, func() error { return grant(now) })
		})
		return l, db.namedKey("lease", name, err)
	}
	// Grants called at the same moment share one FULL commit (group.go).
	err = db.doGrant(ctx, grant)
	return l, db.namedKey("lease", name, err)
}

// grantAlone runs grant, a lease grant in autocommit, and has the WAL
// synced after its COMMIT, before it returns, making it and every commit
// before it durable (walsync.go); on a SyncFull handle, whose every commit
// the caller syncs (syncCommitted), it runs grant as it is. Callers hold mu.
func (db *DB) grantAlone(ctx context.Context, grant func() error) error {
	return db.durably(ctx, grant)
}

// Renew moves the deadline of l to ttl from now and updates l.Expires. It
// returns ErrLeaseLost once the lease has expired, was released, or a newer
// token was granted; it never changes the token. A Renew that returns an
// error leaves l as it was.
func (db *DB) Renew(ctx context.Context, l *Lease, ttl time.Duration) error {
	ms, err := checkHeld(l, ttl)
	if err != nil {
		return db.named("renew", leaseName(l), err)
	}
	subject := leaseName(l) // before renew can change the token
	if db.remote != nil {
		_, err := viaRemote(db, func(r remote) (struct{}, error) { return struct{}{}, r.Renew(ctx, l, ms) })
		return db.named("renew", subject, err)
	}
	// The verb works on a copy of l, which l takes only once the verb
	// succeeded: its statement may run in a group that rolls back, and
	// then, run again alone, fail (its context ended meanwhile).
	held, next := *l, *l
	err = db.do(ctx, grouped, func(now int64) error {
		next = held
		return db.renew(ctx, now, &next, ms)
	})
	if err != nil {
		return db.named("renew", subject, err)
	}
	*l = next
	return nil
}

// Release ends l at once, keeping its token so the next grant gets a higher
// one, and sets l.Expires to the time it ended. It returns ErrLeaseLost
// when l is no longer held. A Release that returns an error leaves l as it
// was.
func (db *DB) Release(ctx context.Context, l *Lease) error {
	if _, err := checkHeld(l, time.Millisecond); err != nil {
		return db.named("release", leaseName(l), err)
	}
	if db.remote != nil {
		_, err := viaRemote(db, func(r remote) (struct{}, error) { return struct{}{}, r.Release(ctx, l) })
		return db.named("release", leaseName(l), err)
	}
	held, next := *l, *l // as Renew: l moves only once the verb succeeded
	err := db.do(ctx, grouped, func(now int64) error {
		next = held
		return db.release(ctx, now, &next)
	})
	if err != nil {
		return db.named("release", leaseName(l), err)
	}
	*l = next
	return nil
}

// pagesWritten returns how many pages the handle's connection has written
// since the count was last reset (by a checkpoint: checkpoint.go), or -1 when it
// cannot tell. Callers hold mu.
func (db *DB) pagesWritten() int {
	if db.pages == nil {
		return -1
	}
	n, _, err := db.pages.Status(sqlite.DBStatusCacheWrite, false)
	if err != nil {
		return -1
	}
	return n
}

func checkLease(name, owner string, ttl time.Duration) (int64, error) {
	if err := checkKey("lease name", name); err != nil {
		return 0, err
	}
	if err := checkOwner(owner); err != nil {
		return 0, err
	}
	return ttlMillis(ttl)
}

func checkHeld(l *Lease, ttl time.Duration) (int64, error) {
	if l == nil {
		return 0, fmt.Errorf("%w: nil *Lease", ErrInvalidArgument)
	}
	return checkLease(l.Name, l.Owner, ttl)
}

// durably runs fn, autocommit statements, and then syncs the WAL, so that
// their commit is durable before it returns, and every commit before it
// (walsync.go). The sync runs after COMMIT, outside the file's write lock.
// Even a grant that wrote nothing (the holder asked again for the deadline
// it has: SQLite writes nothing for a row overwritten with the same bytes)
// syncs: it must leave every commit before it durable, like any other.
func (db *DB) durably(ctx context.Context, fn func() error) error {
	if db.cfg.sync == SyncFull || db.cfg.bugs.Has(bugs.LeaseNormalSync) {
		return fn()
	}
	if err := fn(); err != nil {
		return err
	}
	return db.syncGrant()
}

func (db *DB) lease(ctx context.Context, now int64, name, owner string, ttl int64) (*Lease, error) {
	if db.cfg.bugs.Has(bugs.LeaseTwoStatements) {
		return db.bugLeaseTwoStatements(ctx, now, name, owner, ttl)
	}
	var token int64
	var extended bool
	for tries := 1; ; tries++ {
		id := grantNumbers.Add(1)
		err := db.st.leaseGrant.QueryRowContext(ctx, name, owner, now+ttl, now, id).Scan(&token)
		extended = tookExtended(id)
		if errors.Is(err, sql.ErrNoRows) {
			// The holder is read in a second statement: another process may
			// have released the lease, or lost it, in between. Report it
			// held only as that read saw it; if it is free, ask again.
			if err := db.leaseHeld(ctx, now, name, owner); err != nil {
				return nil, err
			}
			if tries == leaseGrantTries {
				return nil, fmt.Errorf("%w: its holder kept changing", ErrBusy)
			}
			continue
		}
		if err != nil {
			return nil, classify(ctx, err)
		}
		break
	}
	if token < 1 {
		panic(fmt.Sprintf("statekit: lease %q granted token %d", name, token))
	}
	return &Lease{Name: name, Owner: owner, Token: token, Expires: time.UnixMilli(now + ttl), Extended: extended}, nil
}

// leaseGrantTries bounds how often Lease asks again when the holder it was
// refused for is gone by the time it reads the row.
const leaseGrantTries = 16

// leaseHeld builds the error for a lease another owner holds, or returns nil
// when the row, read now, is free or requester's own: the grant may be
// retried.
func (db *DB) leaseHeld(ctx context.Context, now int64, name, requester string) error {
	var owner string
	var token, at int64
	err := db.st.leaseGet.QueryRowContext(ctx, name).Scan(&owner, &token, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return classify(ctx, err)
	}
	if at <= now || owner == requester {
		return nil
	}
	return &LeaseHeldError{Name: name, Owner: owner, Expires: time.UnixMilli(at),
		Left: millisDuration(at - now)}
}

func (db *DB) renew(ctx context.Context, now int64, l *Lease, ttl int64) error {
	stmt := db.st.renew
	if db.cfg.bugs.Has(bugs.RenewBumpsToken) {
		stmt = db.st.bugRenewBump
	}
	var token int64
	err := stmt.QueryRowContext(ctx, l.Name, l.Owner, l.Token, now+ttl, now).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrLeaseLost
	}
	if err != nil {
		return classify(ctx, err)
	}
	l.Token = token
	l.Expires = time.UnixMilli(now + ttl)
	return nil
}

func (db *DB) release(ctx context.Context, now int64, l *Lease) error {
	stmt := db.st.release
	if db.cfg.bugs.Has(bugs.ReleaseDeletes) {
		stmt = db.st.bugReleaseDelete
	}
	var one int
	err := stmt.QueryRowContext(ctx, l.Name, l.Owner, l.Token, now).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrLeaseLost
	}
	if err != nil {
		return classify(ctx, err)
	}
	l.Expires = time.UnixMilli(now)
	return nil
}
