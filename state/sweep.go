package state

import (
	"context"
	"errors"
	"time"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/internal/hooks"
)

const (
	// sweepBatchRows bounds one sweep transaction, so no single delete
	// holds the write lock long.
	sweepBatchRows = 256
	// sweepBatchTime is how long a sweep transaction should take: the
	// batch size halves after a longer one and doubles after one of less
	// than half, between 1 and sweepBatchRows rows. Expired rows whose
	// keys were written far apart sit on different pages, a page or two
	// to write each; rows written together share pages. A verb waits for
	// at most one batch.
	// 100 µs keeps the p99 of an Incr beside a long sweep within 3x its
	// idle p99 (measured 2.2-2.8x; 150 µs gave 2.5-3.9x) at half the
	// rows per second (about 20k, from 35k: each transaction has a fixed
	// cost of a few page writes).
	sweepBatchTime = 100 * time.Microsecond
	// sweepBatchWrites is how many writes a sweep batch that deleted rows
	// counts for toward the next background checkpoint.
	sweepBatchWrites = 4
	// inlineSweepEvery is how many writes pass between two small inline
	// sweep batches.
	inlineSweepEvery = 256
	// inlineSweepRows bounds an inline sweep batch.
	inlineSweepRows = 32
	// sweepSQL deletes up to ?2 rows whose deadline is at or before ?1,
	// through the partial index on expires_at. Leases are never swept.
	sweepSQL = `DELETE FROM kv WHERE rowid IN
(SELECT rowid FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?1 LIMIT ?2)`
	// sweepKeysSQL is sweepSQL returning the keys it deletes, for a
	// simulator's sweep observer (internal/hooks).
	sweepKeysSQL = sweepSQL + "\nRETURNING key"
)

// Sweep deletes every expired key now, in transactions of at most a few
// hundred rows, and returns how many it deleted. Expired keys are already
// absent to every verb; sweeping only reclaims their space. Leases are never
// swept. A background goroutine sweeps every DefaultSweepInterval unless
// WithSweepInterval or WithoutBackground say otherwise. Each transaction is
// sized to take about 100 microseconds, and transactions take turns
// with the write verbs other goroutines call meanwhile, so a verb waits for
// one at most.
func (db *DB) Sweep(ctx context.Context) (int, error) {
	if db.remote != nil {
		n, err := viaRemote(db, func(r remote) (int, error) { return r.Sweep(ctx) })
		return n, db.named("sweep", "", err)
	}
	n, err := db.sweep(ctx)
	return n, db.named("sweep", "", err)
}

// sweep is Sweep, its errors not yet named.
func (db *DB) sweep(ctx context.Context) (int, error) {
	total := 0
	start := int64(-1) // every batch deletes what was expired when the sweep began
	for {
		var n, limit int
		err := db.do(ctx, sweeping, func(now int64) (err error) {
			if start < 0 {
				start = now
			}
			limit = db.sweepLimit()
			began := db.cfg.clock.Monotonic()
			n, err = db.sweepBatch(ctx, start, limit)
			db.sweepTook(db.cfg.clock.Monotonic() - began)
			if n > 0 {
				db.bg.ckpt.wrote(sweepBatchWrites)
			}
			return err
		})
		total += n
		if err != nil || n < limit {
			return total, err
		}
	}
}

// sweepLimit returns the rows the next sweep batch may delete. Callers
// hold mu.
func (db *DB) sweepLimit() int {
	if db.sweepRows == 0 {
		db.sweepRows = inlineSweepRows
	}
	return db.sweepRows
}

// sweepTook adapts the batch size to how long the last batch took, by the
// injected clock (a simulator's stands still: batches grow to the bound).
// Callers hold mu.
func (db *DB) sweepTook(d time.Duration) {
	switch {
	case d > sweepBatchTime && db.sweepRows > 1:
		db.sweepRows /= 2
	case d < sweepBatchTime/2 && db.sweepRows < sweepBatchRows:
		db.sweepRows *= 2
	}
}

// sweepBatch deletes up to limit expired keys in one statement.
func (db *DB) sweepBatch(ctx context.Context, now int64, limit int) (int, error) {
	cutoff := now
	if db.cfg.bugs.Has(bugs.SweepEarly) {
		now++
	}
	if o := db.cfg.sweeps; o != nil {
		return db.sweepObserved(ctx, o, cutoff, now, limit)
	}
	res, err := db.st.sweep.ExecContext(ctx, now, limit)
	if err != nil {
		return 0, classify(ctx, err)
	}
	n, err := res.RowsAffected()
	return int(n), classify(ctx, err)
}

// sweepObserved is sweepBatch for a simulator that is told the keys each
// sweep deletes: the same statement, returning them.
func (db *DB) sweepObserved(ctx context.Context, o hooks.SweepObserver, cutoff, now int64, limit int) (int, error) {
	end := o.Sweeping(cutoff)
	var keys []string
	rs, err := db.st.sweepKeys.QueryContext(ctx, now, limit)
	if err == nil {
		for rs.Next() {
			var k string
			if err = rs.Scan(&k); err != nil {
				break
			}
			keys = append(keys, k)
		}
		err = errors.Join(err, rs.Err(), rs.Close())
	}
	err = classify(ctx, err)
	end(keys, err)
	return len(keys), err
}

// afterWrite checkpoints when due, and sweeps a small batch every
// inlineSweepEvery writes, so a busy
// handle reclaims expired keys even without the background sweeper. Its
// errors are not the verb's: a fatal one ends the handle for the next call.
// WithoutBackground turns it off too: a simulator sweeps only when it says.
// Callers hold mu.
func (db *DB) afterWrite(ctx context.Context, now int64) {
	db.checkpointIfDue(ctx)
	if !db.cfg.background {
		return
	}
	db.writes++
	if db.writes < db.cfg.inlineSweepEvery {
		return
	}
	db.writes = 0
	began := db.cfg.clock.Monotonic()
	_, err := db.sweepBatch(ctx, now, min(db.sweepLimit(), inlineSweepRows))
	db.sweepTook(db.cfg.clock.Monotonic() - began)
	db.note(err)
}
