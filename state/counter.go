package state

import (
	"context"
	"database/sql"
	"errors"
	"math"

	"github.com/statekit/statekit/internal/bugs"
)

// incrLiveSQL is the increment of a live or absent key in one statement,
// the verbs' hot path: an absent key starts from delta with the TTL (?3,
// NULL for none); a live integer adds delta; bytes or a result outside
// [?5, ?6] raise an error and change nothing. ?4 is now. It leaves an
// expired key alone (no row returned) for incrSQL. Its SET names value
// only: a statement that sets expires_at, even to the value it had,
// rewrites the key's entry in the expiry index, a second page written per
// increment of a key with a deadline (measured: 2.01 WAL frames per
// increment on random keys against 1.00), and a second page for every
// checkpoint to copy.
const incrLiveSQL = `INSERT INTO kv(key, value, expires_at) VALUES (?1, ?2, ?3)
ON CONFLICT(key) DO UPDATE SET
	value = CASE
		WHEN typeof(kv.value) <> 'integer' THEN statekit_raise('` + raiseNotInteger + `')
		WHEN kv.value < ?5 OR kv.value > ?6 THEN statekit_raise('` + raiseOverflow + `')
		ELSE kv.value + ?2
	END
WHERE kv.expires_at IS NULL OR kv.expires_at > ?4
RETURNING value`

// incrSQL is the whole increment in one statement: an absent or expired key
// starts over from delta with the TTL (?3, NULL for none); a live integer
// adds delta and keeps its deadline; bytes or a result outside [?5, ?6]
// raise an error and change nothing. ?4 is now. The verbs run it when
// incrLiveSQL found the key expired; it decides again from what it reads,
// so another process's write in between changes nothing of its answer.
const incrSQL = `INSERT INTO kv(key, value, expires_at) VALUES (?1, ?2, ?3)
ON CONFLICT(key) DO UPDATE SET
	value = CASE
		WHEN kv.expires_at IS NOT NULL AND kv.expires_at <= ?4 THEN ?2
		WHEN typeof(kv.value) <> 'integer' THEN statekit_raise('` + raiseNotInteger + `')
		WHEN kv.value < ?5 OR kv.value > ?6 THEN statekit_raise('` + raiseOverflow + `')
		ELSE kv.value + ?2
	END,
	expires_at = CASE
		WHEN kv.expires_at IS NOT NULL AND kv.expires_at <= ?4 THEN ?3
		ELSE kv.expires_at
	END
RETURNING value`

// Incr adds 1 to the integer at key and returns the result. An absent or
// expired key starts from 0; TTL applies only when Incr creates the key. It
// returns ErrNotInteger when the value is bytes and ErrOverflow when the
// result would leave int64; the stored value is then unchanged.
func (db *DB) Incr(ctx context.Context, key string, opts ...WriteOption) (int64, error) {
	return db.incrVerb(ctx, "incr", key, 1, opts)
}

// Decr subtracts 1, as IncrBy with -1.
func (db *DB) Decr(ctx context.Context, key string, opts ...WriteOption) (int64, error) {
	return db.incrVerb(ctx, "decr", key, -1, opts)
}

// DecrBy subtracts delta, as IncrBy with -delta. A delta of math.MinInt64
// gives ErrOverflow.
func (db *DB) DecrBy(ctx context.Context, key string, delta int64, opts ...WriteOption) (int64, error) {
	if delta == math.MinInt64 {
		// Its negation is no int64: the verb's other checks first, then
		// the overflow it always is.
		if _, err := checkIncr(key, opts); err != nil {
			return 0, db.namedKey("decr", key, err)
		}
		if err := db.nothingToDo(ctx); err != nil {
			return 0, db.namedKey("decr", key, err)
		}
		return 0, db.named("decr", keyName(key), ErrOverflow)
	}
	return db.incrVerb(ctx, "decr", key, -delta, opts)
}

// IncrBy adds delta to the integer at key in one statement and returns the
// result, with Incr's rules.
func (db *DB) IncrBy(ctx context.Context, key string, delta int64, opts ...WriteOption) (int64, error) {
	return db.incrVerb(ctx, "incr", key, delta, opts)
}

// incrVerb is the increment verbs, errors named after verb.
func (db *DB) incrVerb(ctx context.Context, verb, key string, delta int64, opts []WriteOption) (int64, error) {
	ttl, err := checkIncr(key, opts)
	if err != nil {
		return 0, db.namedKey(verb, key, err)
	}
	if db.remote != nil {
		n, err := viaRemote(db, func(r remote) (int64, error) { return r.IncrBy(ctx, key, delta, ttl) })
		return n, db.namedKey(verb, key, err)
	}
	var n int64
	err = db.do(ctx, grouped, func(now int64) (err error) {
		n, err = db.incrBy(ctx, now, key, delta, ttl)
		return err
	})
	if err != nil {
		// n may be the answer of a run in a group that rolled back
		// (group.go): a failed verb answers nothing else.
		return 0, db.namedKey(verb, key, err)
	}
	return n, nil
}

func checkIncr(key string, opts []WriteOption) (int64, error) {
	if err := checkKey("key", key); err != nil {
		return 0, err
	}
	return writeTTLMillis(opts)
}

// incrBounds returns the range a value must lie in for value+delta to stay
// inside int64.
func incrBounds(delta int64) (lo, hi int64) {
	lo, hi = math.MinInt64, math.MaxInt64
	if delta > 0 {
		hi -= delta
	} else {
		lo -= delta
	}
	return lo, hi
}

func (db *DB) incrBy(ctx context.Context, now int64, key string, delta, ttl int64) (int64, error) {
	if db.cfg.bugs.Has(bugs.IncrTwoStatements) {
		return db.bugIncrTwoStatements(ctx, now, key, delta, ttl)
	}
	lo, hi := incrBounds(delta)
	var n int64
	dl := deadline(now, ttl)
	err := db.st.incrLive.QueryRowContext(ctx, key, delta, dl, now, lo, hi).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) { // expired: it starts over
		err = db.st.incr.QueryRowContext(ctx, key, delta, dl, now, lo, hi).Scan(&n)
	}
	if err != nil {
		return 0, classify(ctx, err)
	}
	return n, nil
}
