package state

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/statekit/statekit/internal/bugs"
)

// The CAS statements report through the change count (one row changed or
// none), not RETURNING, which would make SQLite buffer the result in a
// temporary table.
const (
	// casSwapSQL swaps a live value equal to ?2 in type (?4) and content,
	// keeping the deadline.
	casSwapSQL = `UPDATE kv SET value = ?3
WHERE key = ?1 AND typeof(value) = ?4 AND value = ?2 AND (expires_at IS NULL OR expires_at > ?5)`
	// casDeleteSQL deletes a live value equal to ?2 in type (?3) and content.
	casDeleteSQL = `DELETE FROM kv
WHERE key = ?1 AND typeof(value) = ?3 AND value = ?2 AND (expires_at IS NULL OR expires_at > ?4)`
	// casCreateSQL stores ?2, without deadline, only where the key is absent
	// or expired.
	casCreateSQL = `INSERT INTO kv(key, value, expires_at) VALUES (?1, ?2, NULL)
ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires_at = NULL
WHERE kv.expires_at IS NOT NULL AND kv.expires_at <= ?3`
	// casSwapTTLSQL is casSwapSQL giving the new value the deadline ?6.
	casSwapTTLSQL = `UPDATE kv SET value = ?3, expires_at = ?6
WHERE key = ?1 AND typeof(value) = ?4 AND value = ?2 AND (expires_at IS NULL OR expires_at > ?5)`
	// casCreateTTLSQL is casCreateSQL with the deadline ?4: SET NX PX in
	// one statement.
	casCreateTTLSQL = `INSERT INTO kv(key, value, expires_at) VALUES (?1, ?2, ?4)
ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
WHERE kv.expires_at IS NOT NULL AND kv.expires_at <= ?3`
	// casAbsentSQL says whether the key is absent or expired.
	casAbsentSQL = `SELECT NOT EXISTS (SELECT 1 FROM kv WHERE key = ?1 AND (expires_at IS NULL OR expires_at > ?2))`
)

// CAS sets key to new only if its live value equals expected in type and
// content (int 7 never equals "7"), and reports whether it swapped. A nil
// expected matches only an absent or expired key; a nil new deletes the key
// on a match. Without options a swap keeps the key's deadline and a key
// created by CAS has none; with TTL(d) the value written gets the deadline
// d from now, so CAS(ctx, key, nil, v, TTL(d)) creates key with a deadline
// only if it is absent, in one step (Redis's SET NX PX: an idempotency key,
// "seen this webhook", a lock without a token). Values take the types Set
// takes. CAS returns ErrInvalidTTL for a TTL of zero or less, and
// ErrInvalidArgument for a TTL with a nil new (a delete, or a check that
// the key is absent, writes no value to give it to).
func (db *DB) CAS(ctx context.Context, key string, expected, new any, opts ...WriteOption) (bool, error) {
	exp, nv, ttl, err := checkCAS(key, expected, new, opts)
	if err != nil {
		return false, db.namedKey("cas", key, err)
	}
	if db.remote != nil {
		ok, err := viaRemote(db, func(r remote) (bool, error) { return r.CAS(ctx, key, exp, nv, ttl) })
		return ok, db.namedKey("cas", key, err)
	}
	var ok bool
	err = db.do(ctx, grouped, func(now int64) (err error) {
		ok, err = db.cas(ctx, now, key, exp, nv, ttl)
		return err
	})
	if err != nil {
		return false, db.namedKey("cas", key, err) // as incrVerb: ok may be a rolled-back run's
	}
	return ok, nil
}

// checkCAS validates CAS's arguments and returns its values and the TTL
// in milliseconds (0 for none).
func checkCAS(key string, expected, new any, opts []WriteOption) (exp, nv *Value, ttl int64, err error) {
	if err := checkKey("key", key); err != nil {
		return nil, nil, 0, err
	}
	if expected != nil {
		v, err := toValue(expected)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("expected: %w", err)
		}
		exp = &v
	}
	if new != nil {
		v, err := toValue(new)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("new: %w", err)
		}
		nv = &v
	}
	if ttl, err = writeTTLMillis(opts); err != nil {
		return nil, nil, 0, err
	}
	if ttl > 0 && nv == nil {
		return nil, nil, 0, fmt.Errorf("%w: a TTL with a nil new value: a CAS that writes no value has nothing to give it to", ErrInvalidArgument)
	}
	return exp, nv, ttl, nil
}

func (db *DB) cas(ctx context.Context, now int64, key string, exp, nv *Value, ttl int64) (bool, error) {
	var res driver.Result
	var err error
	switch {
	case exp == nil && nv == nil:
		var absent bool
		if err := db.st.casAbsent.QueryRowContext(ctx, key, now).Scan(&absent); err != nil {
			return false, classify(ctx, err)
		}
		return absent, nil
	case exp == nil && ttl > 0:
		res, err = db.st.casCreateTTL.ExecContext(ctx, key, nv.sqlArg(), now, now+ttl)
	case exp == nil:
		res, err = db.st.casCreate.ExecContext(ctx, key, nv.sqlArg(), now)
	case db.cfg.bugs.Has(bugs.CASIgnoresType) && ttl == 0 && nv != nil:
		return db.bugCASIgnoresType(ctx, now, key, *exp, nv)
	case nv == nil:
		res, err = db.st.casDelete.ExecContext(ctx, key, exp.sqlArg(), exp.sqlType(), now)
	case ttl > 0 && !db.cfg.bugs.Has(bugs.CASTTLKeepsDeadline):
		res, err = db.st.casSwapTTL.ExecContext(ctx, key, exp.sqlArg(), nv.sqlArg(), exp.sqlType(), now, now+ttl)
	case ttl == 0 && db.cfg.bugs.Has(bugs.CASSwapClearsDeadline):
		res, err = db.st.casSwapTTL.ExecContext(ctx, key, exp.sqlArg(), nv.sqlArg(), exp.sqlType(), now, nil)
	default:
		res, err = db.st.casSwap.ExecContext(ctx, key, exp.sqlArg(), nv.sqlArg(), exp.sqlType(), now)
	}
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return false, classify(ctx, err)
	}
	return n == 1, nil
}
