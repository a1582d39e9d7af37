package state

import (
	"context"

	"github.com/statekit/statekit/internal/bugs"
)

const (
	// sweepBatchRows bounds one sweep transaction, so no single delete
	// holds the write lock long.
	sweepBatchRows = 256
	// inlineSweepEvery is how many writes pass between two small inline
	// sweep batches.
	inlineSweepEvery = 256
	// inlineSweepRows bounds an inline sweep batch.
	inlineSweepRows = 32
	// sweepSQL deletes up to ?2 rows whose deadline is at or before ?1,
	// through the partial index on expires_at. Leases are never swept.
	sweepSQL = `DELETE FROM kv WHERE rowid IN
(SELECT rowid FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?1 LIMIT ?2)`
)

// Sweep deletes every expired key now, in transactions of at most a few
// hundred rows, and returns how many it deleted. Expired keys are already
// absent to every verb; sweeping only reclaims their space. Leases are never
// swept. A background goroutine sweeps every DefaultSweepInterval unless
// WithSweepInterval or WithoutBackground say otherwise.
func (db *DB) Sweep(ctx context.Context) (int, error) {
	total := 0
	start := int64(-1) // every batch deletes what was expired when the sweep began
	for {
		var n int
		err := db.do(ctx, sweeping, func(now int64) (err error) {
			if start < 0 {
				start = now
			}
			n, err = db.sweepBatch(ctx, start, sweepBatchRows)
			return err
		})
		total += n
		if err != nil || n < sweepBatchRows {
			return total, err
		}
	}
}

// sweepBatch deletes up to limit expired keys in one statement.
func (db *DB) sweepBatch(ctx context.Context, now int64, limit int) (int, error) {
	if db.cfg.bugs.Has(bugs.SweepEarly) {
		now++
	}
	res, err := db.st.sweep.ExecContext(ctx, now, limit)
	if err != nil {
		return 0, classify(ctx, err)
	}
	n, err := res.RowsAffected()
	return int(n), classify(ctx, err)
}

// afterWrite sweeps a small batch every inlineSweepEvery writes, so a busy
// handle reclaims expired keys even without the background sweeper. Its
// errors are not the verb's: a fatal one ends the handle for the next call.
// WithoutBackground turns it off too: a simulator sweeps only when it says.
// Callers hold mu.
func (db *DB) afterWrite(ctx context.Context, now int64) {
	if !db.cfg.background {
		return
	}
	db.writes++
	if db.writes < inlineSweepEvery {
		return
	}
	db.writes = 0
	_, err := db.sweepBatch(ctx, now, inlineSweepRows)
	db.note(err)
}
