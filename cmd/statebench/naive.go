package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // the same driver statekit runs on
)

// The naive baseline: what a developer writes in an afternoon. A
// database/sql pool on the same modernc SQLite, the same pragmas as statekit
// (WAL, synchronous=NORMAL, busy_timeout), the same kv table and index as
// statekit's documented schema, and one prepared statement per verb, with
// now read from time.Now.
const (
	naiveDSN = "file:%s?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	// naiveSchema is statekit's kv table and index, so both sides do the
	// same work per row.
	naiveSchema = `CREATE TABLE IF NOT EXISTS kv (
	key        TEXT PRIMARY KEY,
	value      NOT NULL,
	expires_at INTEGER
);
CREATE INDEX IF NOT EXISTS kv_expires ON kv(expires_at) WHERE expires_at IS NOT NULL`
	naiveIncrSQL = `INSERT INTO kv(key, value) VALUES (?1, 1)
ON CONFLICT(key) DO UPDATE SET value = value + 1 RETURNING value`
	naiveGetSQL = `SELECT value FROM kv WHERE key = ?1 AND (expires_at IS NULL OR expires_at > ?2)`
	naiveSetSQL = `INSERT INTO kv(key, value, expires_at) VALUES (?1, ?2, ?3)
ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`
	naiveCASSQL = `UPDATE kv SET value = ?3 WHERE key = ?1 AND value = ?2`
)

// naive is an open baseline database.
type naive struct {
	db                  *sql.DB
	incr, get, set, cas *sql.Stmt
}

// openNaive opens (creating) the baseline database at path.
func openNaive(path string) (*naive, error) {
	db, err := sql.Open("sqlite", fmt.Sprintf(naiveDSN, path))
	if err != nil {
		return nil, fmt.Errorf("naive open: %w", err)
	}
	n := &naive{db: db}
	if _, err := db.Exec(naiveSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("naive schema: %w", err)
	}
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{{&n.incr, naiveIncrSQL}, {&n.get, naiveGetSQL}, {&n.set, naiveSetSQL}, {&n.cas, naiveCASSQL}} {
		if *p.dst, err = db.Prepare(p.sql); err != nil {
			db.Close()
			return nil, fmt.Errorf("naive prepare: %w", err)
		}
	}
	return n, nil
}

func (n *naive) close() error { return n.db.Close() }

func (n *naive) doIncr(ctx context.Context, key string) (int64, error) {
	var v int64
	err := n.incr.QueryRowContext(ctx, key).Scan(&v)
	return v, err
}

// doIncrToEnd is doIncr reading the statement's rows to their end, as a
// loop over Query does: the statement then steps to its end, where SQLite
// runs its automatic checkpoint (every 1000 WAL pages, inline), so this
// baseline bounds its WAL as statekit does.
func (n *naive) doIncrToEnd(ctx context.Context, key string) (int64, error) {
	rows, err := n.incr.QueryContext(ctx, key)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var v int64
	for rows.Next() {
		if err := rows.Scan(&v); err != nil {
			return 0, err
		}
	}
	return v, rows.Err()
}

func (n *naive) doGet(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := n.get.QueryRowContext(ctx, key, time.Now().UnixMilli()).Scan(&v)
	return v, err
}

func (n *naive) doSet(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	_, err := n.set.ExecContext(ctx, key, value, time.Now().Add(ttl).UnixMilli())
	return err
}

// doCAS swaps an integer and reports whether it did.
func (n *naive) doCAS(ctx context.Context, key string, old, new int64) (bool, error) {
	res, err := n.cas.ExecContext(ctx, key, old, new)
	if err != nil {
		return false, err
	}
	k, err := res.RowsAffected()
	return k == 1, err
}
