package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/statekit/statekit/internal/bugs"
)

const (
	// getSQL reads a live value: an expired row is absent at once.
	getSQL = `SELECT value FROM kv WHERE key = ?1 AND (expires_at IS NULL OR expires_at > ?2)`
	// setSQL replaces value, type and deadline (NULL drops an old TTL).
	setSQL = `INSERT INTO kv(key, value, expires_at) VALUES (?1, ?2, ?3)
ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`
	// delOneSQL deletes a key and says whether it was live.
	delOneSQL = `DELETE FROM kv WHERE key = ?1 RETURNING expires_at IS NULL OR expires_at > ?2`
	// delManySQL deletes the keys of a JSON array and says, per row,
	// whether it was live.
	delManySQL = `DELETE FROM kv WHERE key IN (SELECT value FROM json_each(?1))
RETURNING expires_at IS NULL OR expires_at > ?2`
)

// Get returns the live value of key. It returns ErrNotFound when the key is
// absent or its deadline has passed, ErrInvalidKey for a bad key, and
// ErrClosed after Close.
func (db *DB) Get(ctx context.Context, key string) (Value, error) {
	if err := checkKey("key", key); err != nil {
		return Value{}, db.namedKey("get", key, err)
	}
	if db.remote != nil {
		v, err := viaRemote(db, func(r remote) (Value, error) { return r.Get(ctx, key) })
		return v, db.namedKey("get", key, err)
	}
	var v Value
	err := db.do(ctx, reading, func(now int64) (err error) {
		v, err = db.get(ctx, now, key)
		return err
	})
	return v, db.namedKey("get", key, err)
}

// Set stores value under key, replacing its value, type and deadline: the
// old TTL is dropped unless TTL is given. value is an int, int64 (stored as
// an integer), string or []byte (stored as bytes, never parsed as a number),
// or a Value as Get returns it (so a value read can be written back, or
// given to CAS as expected). It returns ErrInvalidKey, ErrInvalidValue or
// ErrInvalidTTL for bad input, writing nothing.
func (db *DB) Set(ctx context.Context, key string, value any, opts ...WriteOption) error {
	v, ttl, err := checkSet(key, value, opts)
	if err != nil {
		return db.namedKey("set", key, err)
	}
	if db.remote != nil {
		_, err := viaRemote(db, func(r remote) (struct{}, error) { return struct{}{}, r.Set(ctx, key, v, ttl) })
		return db.namedKey("set", key, err)
	}
	err = db.do(ctx, grouped, func(now int64) error { return db.set(ctx, now, key, v, ttl) })
	return db.namedKey("set", key, err)
}

// Del deletes keys and returns how many of them were live. Expired rows are
// deleted too but not counted; a key named twice counts once.
func (db *DB) Del(ctx context.Context, keys ...string) (int, error) {
	if err := checkKeys(keys); err != nil {
		return 0, db.named("del", keysName(keys), err)
	}
	if len(keys) == 0 {
		return 0, db.named("del", "", db.nothingToDo(ctx))
	}
	if db.remote != nil {
		n, err := viaRemote(db, func(r remote) (int, error) { return r.Del(ctx, keys) })
		return n, db.named("del", keysName(keys), err)
	}
	var n int
	err := db.do(ctx, grouped, func(now int64) (err error) {
		n, err = db.del(ctx, now, keys)
		return err
	})
	if err != nil {
		return 0, db.named("del", keysName(keys), err) // as incrVerb: n may be a rolled-back run's
	}
	return n, nil
}

func checkSet(key string, value any, opts []WriteOption) (Value, int64, error) {
	if err := checkKey("key", key); err != nil {
		return Value{}, 0, err
	}
	v, err := toValue(value)
	if err != nil {
		return Value{}, 0, err
	}
	ttl, err := writeTTLMillis(opts)
	if err != nil {
		return Value{}, 0, err
	}
	return v, ttl, nil
}

func checkKeys(keys []string) error {
	for i, k := range keys {
		what := "key"
		if len(keys) > 1 {
			// The message names the Del's first keys only: say which.
			what = fmt.Sprintf("key %d of %d (%s)", i+1, len(keys), keyName(k))
		}
		if err := checkKey(what, k); err != nil {
			return err
		}
	}
	return nil
}

func (db *DB) get(ctx context.Context, now int64, key string) (Value, error) {
	stmt := db.st.get
	if db.cfg.bugs.Has(bugs.ReadIgnoresDeadline) {
		stmt = db.st.bugGetAny
	}
	var raw any
	err := stmt.QueryRowContext(ctx, key, now).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return Value{}, ErrNotFound
	}
	if err != nil {
		return Value{}, classify(ctx, err)
	}
	return fromSQL(raw)
}

func (db *DB) set(ctx context.Context, now int64, key string, v Value, ttl int64) error {
	_, err := db.st.set.ExecContext(ctx, key, v.sqlArg(), deadline(now, ttl))
	return classify(ctx, err)
}

func (db *DB) del(ctx context.Context, now int64, keys []string) (int, error) {
	var rs *rows
	var err error
	if len(keys) == 1 {
		rs, err = db.st.delOne.QueryContext(ctx, keys[0], now)
	} else {
		list, jerr := json.Marshal(keys)
		if jerr != nil {
			return 0, fmt.Errorf("del: %w", jerr)
		}
		stmt := db.st.delMany
		if db.cfg.bugs.Has(bugs.DelCountsExpired) {
			stmt = db.st.bugDelAll
		}
		rs, err = stmt.QueryContext(ctx, string(list), now)
	}
	if err != nil {
		return 0, classify(ctx, err)
	}
	return countTrue(ctx, rs)
}

// countTrue counts the rows whose single column is true, and closes rs.
func countTrue(ctx context.Context, rs *rows) (int, error) {
	defer rs.Close()
	n := 0
	for rs.Next() {
		var live bool
		if err := rs.Scan(&live); err != nil {
			return n, classify(ctx, err)
		}
		if live {
			n++
		}
	}
	return n, classify(ctx, rs.Err())
}

// deadline returns now+ttl as an SQL parameter, or NULL for no TTL.
func deadline(now, ttlMillis int64) any {
	if ttlMillis <= 0 {
		return nil
	}
	return now + ttlMillis
}
