package state

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

const (
	// expireSQL sets the deadline of a live key.
	expireSQL = `UPDATE kv SET expires_at = ?2
WHERE key = ?1 AND (expires_at IS NULL OR expires_at > ?3)
RETURNING 1`
	// ttlSQL reads the deadline of a live key (NULL: none).
	ttlSQL = `SELECT expires_at FROM kv WHERE key = ?1 AND (expires_at IS NULL OR expires_at > ?2)`
)

// Expire sets the deadline of a live key to ttl from now (rounded up to
// whole milliseconds) and reports true; for an absent or expired key it
// reports false. A ttl of zero or less deletes the key, as Redis does, and
// reports whether it was live.
func (db *DB) Expire(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if err := checkKey("key", key); err != nil {
		return false, db.namedKey("expire", key, err)
	}
	if db.remote != nil {
		ok, err := viaRemote(db, func(r remote) (bool, error) { return r.Expire(ctx, key, expireMillis(ttl)) })
		return ok, db.namedKey("expire", key, err)
	}
	var ok bool
	err := db.do(ctx, grouped, func(now int64) (err error) {
		ok, err = db.expire(ctx, now, key, ttl)
		return err
	})
	if err != nil {
		return false, db.namedKey("expire", key, err) // as incrVerb: ok may be a rolled-back run's
	}
	return ok, nil
}

// TTL returns the time key has left, NoExpiry for a live key without a
// deadline, or ErrNotFound for an absent or expired key.
func (db *DB) TTL(ctx context.Context, key string) (time.Duration, error) {
	if err := checkKey("key", key); err != nil {
		return 0, db.namedKey("ttl", key, err)
	}
	if db.remote != nil {
		left, err := viaRemote(db, func(r remote) (time.Duration, error) { return r.TTL(ctx, key) })
		return left, db.namedKey("ttl", key, err)
	}
	var left time.Duration
	err := db.do(ctx, reading, func(now int64) (err error) {
		left, err = db.ttl(ctx, now, key)
		return err
	})
	return left, db.namedKey("ttl", key, err)
}

func (db *DB) expire(ctx context.Context, now int64, key string, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		n, err := db.del(ctx, now, []string{key})
		return n == 1, err
	}
	ms, err := ttlMillis(ttl)
	if err != nil {
		return false, err
	}
	var one int
	err = db.st.expire.QueryRowContext(ctx, key, now+ms, now).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, classify(ctx, err)
	}
	return true, nil
}

func (db *DB) ttl(ctx context.Context, now int64, key string) (time.Duration, error) {
	var at sql.NullInt64
	err := db.st.ttl.QueryRowContext(ctx, key, now).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, classify(ctx, err)
	}
	if !at.Valid {
		return NoExpiry, nil
	}
	return millisDuration(at.Int64 - now), nil
}
