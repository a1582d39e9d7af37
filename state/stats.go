package state

import (
	"context"
	"math"
	"time"

	"github.com/statekit/statekit/internal/bugs"
)

const (
	// statsKeysSQL counts live keys, live keys with a deadline, and expired
	// keys not swept yet, at now ?1.
	statsKeysSQL = `SELECT
	count(*) FILTER (WHERE expires_at IS NULL OR expires_at > ?1),
	count(*) FILTER (WHERE expires_at > ?1),
	count(*) FILTER (WHERE expires_at <= ?1)
FROM kv`
	// statsLeasesSQL counts leases held at now ?1, and every lease row.
	statsLeasesSQL = `SELECT count(*) FILTER (WHERE expires_at > ?1), count(*) FROM leases`
)

// HighWaterLead (500 ms) is the furthest ahead of the engine's time a
// running writer keeps the file's high-water mark (a writer that started from
// a mark ahead of the wall clock keeps a shorter lead, 50 ms). So after a
// crash the next Open's time may start up to this much past the last time
// used, and a live deadline (a key's TTL, a lease) ends up to this much
// early; a clean Close leaves no lead. A mark further ahead of the wall
// clock than this means the wall clock stepped back, a writer's clock ran
// ahead, or processes were killed again and again.
const HighWaterLead = hwmLeadMillis * time.Millisecond

// Stats is a summary of a file, as Stats reports it.
type Stats struct {
	SchemaVersion    int   // PRAGMA user_version
	Keys             int64 // live keys
	KeysWithDeadline int64 // live keys that have a deadline
	ExpiredKeys      int64 // keys past their deadline, not swept yet
	Leases           int64 // leases held now
	LeaseNames       int64 // lease rows: every name ever granted, held or free
	PageSize         int64 // bytes per database page
	Pages            int64 // pages in the database, the WAL's newer pages included
	FreePages        int64 // pages on the free list

	// HighWater is the file's clock high-water mark: a time at or after
	// every time a writer of the file has used.
	HighWater time.Time
	// Now is the engine's time the counts were taken at: the larger of
	// the wall clock at Open and the mark, advanced by the monotonic clock.
	Now time.Time
	// Wall is the injected clock's wall time when the counts were taken.
	Wall time.Time
	// ClockBehind is how far Wall is behind HighWater beyond HighWaterLead:
	// zero for a sane clock. While it is positive, the engine counts
	// deadlines from the mark, not from the wall clock.
	ClockBehind time.Duration
}

// Stats counts keys and leases and reads the file's schema version, size in
// pages and clock high-water mark, all in one read transaction.
//
// Stats returns ErrClosed after Close and the errors of a failed read
// (ErrBusy, ErrIO, ErrCorrupt).
func (db *DB) Stats(ctx context.Context) (Stats, error) {
	if db.remote != nil {
		s, err := viaRemote(db, func(r remote) (Stats, error) { return r.Stats(ctx) })
		return s, db.named("stats", "", err)
	}
	var s Stats
	err := db.do(ctx, reading, func(now int64) error {
		return db.inReadTx(ctx, func() error { return db.stats(ctx, now, &s) })
	})
	if err != nil {
		return Stats{}, db.named("stats", "", err)
	}
	return s, nil
}

// stats fills s. Callers hold mu.
func (db *DB) stats(ctx context.Context, now int64, s *Stats) error {
	var hwm int64
	keysAt := now
	if db.cfg.bugs.Has(bugs.StatsCountsExpired) {
		keysAt = math.MinInt64 // every deadline still ahead
	}
	scans := []struct {
		query string
		args  []any
		dst   []any
	}{
		{`PRAGMA user_version`, nil, []any{&s.SchemaVersion}},
		{`PRAGMA page_size`, nil, []any{&s.PageSize}},
		{`PRAGMA page_count`, nil, []any{&s.Pages}},
		{`PRAGMA freelist_count`, nil, []any{&s.FreePages}},
		{hwmGetSQL, nil, []any{&hwm}},
		{statsKeysSQL, []any{keysAt}, []any{&s.Keys, &s.KeysWithDeadline, &s.ExpiredKeys}},
		{statsLeasesSQL, []any{now}, []any{&s.Leases, &s.LeaseNames}},
	}
	for _, q := range scans {
		if err := db.conn.QueryRowContext(ctx, q.query, q.args...).Scan(q.dst...); err != nil {
			return classify(ctx, err)
		}
	}
	s.HighWater = time.UnixMilli(hwm)
	s.Now = time.UnixMilli(now)
	s.Wall = db.cfg.clock.Wall()
	if behind := s.HighWater.Sub(s.Wall) - HighWaterLead; behind > 0 {
		s.ClockBehind = behind
	}
	return nil
}
