package state

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/statekit/statekit/internal/bugs"
)

const (
	// The scan query is put together from these by scanSQL: the first page
	// starts at the prefix (?1), the next ones after the last key seen
	// (?1); a prefix bounds it with the first key past it (?2). ?3
	// includes expired rows, ?4 is now, ?5 the page size.
	scanFromSQL    = `SELECT key, value, expires_at FROM kv WHERE key >= ?1`
	scanAfterSQL   = `SELECT key, value, expires_at FROM kv WHERE key > ?1`
	scanBoundedSQL = ` AND key < ?2`
	scanTailSQL    = ` AND (?3 OR expires_at IS NULL OR expires_at > ?4) ORDER BY key LIMIT ?5`
)

// KeyInfo is one row of the key table, as Scan reports it.
type KeyInfo struct {
	Key     string        // the key
	Value   Value         // its value, integer or bytes
	Expires time.Time     // the deadline; the zero Time when the key has none
	Left    time.Duration // time until the deadline: NoExpiry without one, zero or less once passed
	Expired bool          // the deadline has passed: the key is absent to every verb and awaits a sweep
}

// Scan calls fn for each key that starts with prefix (every key for ""), in
// byte order of the keys. With includeExpired it also reports keys past their
// deadline that no sweep has deleted yet, marked Expired; without it, only
// live keys.
//
// Scan reads a page of keys at a time and calls fn outside the handle's lock,
// so fn may call the DB's other methods; Scan is therefore not a snapshot:
// a key written during the scan may or may not appear, and none appears
// twice. If fn returns an error, Scan stops and returns it.
//
// Scan returns ErrInvalidArgument for a nil fn, ErrClosed after Close, a
// wrapped ErrCorrupt naming the key for a value that is neither an integer
// nor bytes (the handle stays usable), and the errors of a failed read
// (ErrBusy, ErrIO, ErrCorrupt).
func (db *DB) Scan(ctx context.Context, prefix string, includeExpired bool, fn func(KeyInfo) error) error {
	if fn == nil {
		return db.named("scan", "", fmt.Errorf("%w: nil Scan callback", ErrInvalidArgument))
	}
	if db.remote != nil {
		return db.remoteList("scan", keyName(prefix)+"*", func(r remote, keep func(error) error) error {
			return r.Scan(ctx, prefix, includeExpired, func(k KeyInfo) error { return keep(fn(k)) })
		})
	}
	end := prefixEnd(prefix)
	query, from := scanSQL(true, end != ""), prefix
	if db.cfg.bugs.Has(bugs.ScanIgnoresDeadline) {
		includeExpired = true // and reported live below
	}
	for {
		var page []rawKey
		var now int64
		err := db.do(ctx, reading, func(n int64) (err error) {
			now = n
			page, err = db.scanPage(ctx, query, from, end, includeExpired, now)
			return err
		})
		if err != nil {
			return db.named("scan", keyName(prefix)+"*", err)
		}
		for _, r := range page {
			k, err := r.info(now)
			if db.cfg.bugs.Has(bugs.ScanIgnoresDeadline) && k.Expired {
				k.Left, k.Expired = time.Millisecond, false
			}
			if err != nil {
				return db.named("scan", keyName(prefix)+"*", err)
			}
			if err := fn(k); err != nil {
				return err
			}
		}
		if len(page) < scanPageRows {
			return nil
		}
		query, from = scanSQL(false, end != ""), page[len(page)-1].key
	}
}

// scanSQL returns the query for the first page or a next one, bounded by
// the end of a prefix or not. A bound in the query, rather than a test of
// ?2 in it, lets SQLite stop at the end of the prefix.
func scanSQL(first, bounded bool) string {
	q := scanAfterSQL
	if first {
		q = scanFromSQL
	}
	if bounded {
		q += scanBoundedSQL
	}
	return q + scanTailSQL
}

// rawKey is a kv row as read, converted to a KeyInfo outside the lock.
type rawKey struct {
	key     string
	value   any
	expires sql.NullInt64
}

func (r rawKey) info(now int64) (KeyInfo, error) {
	v, err := fromSQL(r.value)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("key %q: %w", r.key, err)
	}
	k := KeyInfo{Key: r.key, Value: v, Left: NoExpiry}
	if r.expires.Valid {
		k.Expires = time.UnixMilli(r.expires.Int64)
		k.Left = millisDuration(r.expires.Int64 - now)
		k.Expired = r.expires.Int64 <= now
	}
	return k, nil
}

// scanPage reads up to scanPageRows kv rows. Callers hold mu.
func (db *DB) scanPage(ctx context.Context, query, from, end string, expired bool, now int64) ([]rawKey, error) {
	rows, err := db.conn.QueryContext(ctx, query, from, end, expired, now, scanPageRows)
	if err != nil {
		return nil, classify(ctx, err)
	}
	defer rows.Close()
	var page []rawKey
	for rows.Next() {
		var r rawKey
		if err := rows.Scan(&r.key, &r.value, &r.expires); err != nil {
			return nil, classify(ctx, err)
		}
		page = append(page, r)
	}
	return page, classify(ctx, rows.Err())
}

// prefixEnd returns the least string above every string that starts with
// prefix, in SQLite's byte order, or "" when there is none (no prefix, or a
// prefix of 0xff bytes only). The result need not be valid UTF-8: SQLite
// compares text with memcmp.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}
