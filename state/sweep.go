package state

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/statekit/statekit/internal/bugs"
)

// The sweep. Sweep, the background sweeper and the inline sweep after
// writes delete expired rows; they are already absent to every verb, so a
// sweep only reclaims their space, and it must never delete a row that is
// live when it deletes it. Each statement deletes, in one step, rows whose
// deadline is at or before the sweep's cutoff, the deadline read by the
// DELETE itself under the write lock: a row a write made live again before
// the statement ran is not deleted.
//
// A sweep transaction runs as a queued batch (group.go): it waits its turn
// with the write verbs, so a verb waits for at most one transaction, and
// beside a writer that always has a verb queued its turn comes once the
// verbs of sweepPasses groups went first: a step costs two or three verbs'
// time, mostly its COMMIT, and a sweep taking every other turn made a
// quarter of the writer's verbs wait for one (Incr's p99 3.0-3.5x its idle
// p99 beside a long sweep, against 2.1x with the passes). Inside
// it, the sweep deletes in steps sized to take about sweepBatchTime each,
// and between two steps it asks the group-commit queue whether anyone
// waits: if so it commits at once, so a verb called during a sweep waits
// for at most the step that was running and the COMMIT. A batch that finds
// a verb queued already when its turn comes (beside a busy writer, every
// turn) would commit after its first step: it runs that step alone, one
// DELETE in autocommit, sized with its COMMIT. Before it queues each
// transaction the sweep yields its thread (runtime.Gosched), without the
// lock: a verb's caller that is ready to run on the sweep's thread, woken
// by the last unlock, gets to queue first. It never yields holding the
// lock: a goroutine given its thread then (the background checkpointer,
// copying pages) could keep it for the Go scheduler's time slice, 10 ms
// and more, with every verb waiting. While nobody waits the transaction
// goes on, up to sweepTxnTime or sweepTxnRows, so a sweep
// of a long backlog on an idle handle pays one COMMIT per thousands of
// rows instead of one per few. The background sweeper comes back sooner
// after a pass that found a backlog (sweepPause): effort grows with the
// backlog, and with idle time.
const (
	// sweepBatchRows bounds one step of a sweep transaction.
	sweepBatchRows = 1024
	// sweepBatchTime is how long a sweep step should take: the step size
	// halves after a longer one and doubles after one of less than half,
	// between 1 and sweepBatchRows rows. Expired rows whose keys were
	// written far apart sit on different pages, a page or two to write
	// each; rows written together share pages. The COMMIT is not in the
	// step: a verb waiting beside a sweep waits for one step and one
	// COMMIT.
	// 100 µs keeps the p99 of an Incr beside a long sweep within 3x its
	// idle p99 (measured 2.2-2.8x with one-statement transactions of
	// this size; 150 µs gave 2.5-3.9x).
	sweepBatchTime = 100 * time.Microsecond
	// sweepTxnTime bounds a sweep transaction nobody waits beside: it
	// commits once its steps took this long.
	sweepTxnTime = 2 * time.Millisecond
	// sweepTxnRows bounds the rows of one sweep transaction, for a clock
	// that stands still (a simulator's) and for the size of its COMMIT.
	sweepTxnRows = 16 * sweepBatchRows
	// sweepBatchWrites is how many writes a sweep transaction that deleted
	// rows counts for at least toward the next background checkpoint (it
	// counts the pages it wrote when it knows them).
	sweepBatchWrites = 4
	// inlineSweepEvery is how many writes pass between two small inline
	// sweep batches.
	inlineSweepEvery = 256
	// inlineSweepRows bounds an inline sweep batch.
	inlineSweepRows = 32
	// inlineAssistDivisor divides inlineSweepEvery while the inline
	// sweeps find a backlog (one deleted all the rows it could): a write
	// then sweeps up to inlineAssistRows rows every inlineSweepEvery /
	// inlineAssistDivisor writes (8 by default, two rows a write at most),
	// until a sweep finds fewer. A writer that sets expiring keys faster
	// than the background sweeper gets turns (measured: one writer's
	// 11,000 Sets a second with a 1 s TTL beside about 600 sweep
	// transactions a second, 4,000-12,000 rows, the backlog growing by
	// 4-6 s of sets every 10 s) so deletes them itself, in the same turns
	// as its writes, whoever the Go scheduler runs. Only beside the
	// background sweeper: a handle opened WithSweepInterval(0) sweeps
	// when its owner calls Sweep, and inline at the plain cadence.
	inlineAssistDivisor = 32
	// inlineAssistRows bounds an inline sweep batch while assisting.
	inlineAssistRows = 16
	// sweepBusyRows is how many rows a background pass must delete for the
	// next one to come after sweepBusyPause instead of the sweep interval.
	sweepBusyRows = 256
	// sweepBusyDivisor divides the sweep interval after a pass that found
	// a backlog: the background sweeper comes back ten times sooner.
	sweepBusyDivisor = 10
	// sweepSQL deletes up to ?2 rows whose deadline is at or before ?1,
	// through the partial index on expires_at. Leases are never swept.
	sweepSQL = `DELETE FROM kv WHERE rowid IN
(SELECT rowid FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?1 LIMIT ?2)`
	// sweepKeysSQL is sweepSQL returning the keys it deletes, for a
	// simulator's sweep observer (internal/hooks).
	sweepKeysSQL = sweepSQL + "\nRETURNING key"
)

// Sweep deletes every expired key now and returns how many it deleted.
// Expired keys are already absent to every verb; sweeping only reclaims
// their space. Leases are never swept. A background goroutine sweeps every
// DefaultSweepInterval unless WithSweepInterval or WithoutBackground say
// otherwise. Sweep deletes in transactions of steps, each sized to take
// about 100 microseconds; a transaction commits after the step during
// which a verb queued, and otherwise after 2 ms of steps or once it reached 16,384 rows.
// So a write verb called meanwhile waits for one step and a COMMIT at
// most. Beside writers that keep verbs queued, the sweep takes one turn
// after every 16 groups of their verbs: it goes on, more slowly, and few
// of their verbs wait for it.
func (db *DB) Sweep(ctx context.Context) (int, error) {
	if db.remote != nil {
		n, err := viaRemote(db, func(r remote) (int, error) { return r.Sweep(ctx) })
		return n, db.named("sweep", "", err)
	}
	n, err := db.sweep(ctx, nil)
	return n, db.named("sweep", "", err)
}

// sweep is Sweep, its errors not yet named: transactions (sweepTxn)
// queued as batches until every key expired when it began is gone, or,
// for the background sweeper, until stop reports true after one of them:
// Close began, and waits for the sweeper, which would otherwise hold it
// until the whole backlog was deleted (seconds for millions of keys).
func (db *DB) sweep(ctx context.Context, stop func() bool) (int, error) {
	total := 0
	start := int64(-1) // every transaction deletes what was expired when the sweep began
	stale := &staleSweep{}
	for {
		var n int
		var more bool
		var tell func(error)
		if db.cfg.sched == nil {
			runtime.Gosched() // a simulator's scheduler decides its own points
		}
		err := db.do(ctx, sweeping, func(now int64) (err error) {
			if stop != nil && stop() {
				// Close began while this batch waited for the lock:
				// it begins no transaction.
				return nil
			}
			if start < 0 {
				start = now
			}
			if db.cfg.bugs.Has(bugs.SweepStaleDelete) {
				n, more, tell, err = db.bugSweepStale(ctx, stale, start)
				return err
			}
			n, more, tell, err = db.sweepTxn(ctx, start)
			return err
		})
		if tell != nil {
			// After do, so after the commit's sync when the handle syncs
			// its commits: the observer learns of the sweep once the
			// engine is done with it, the sync's error included.
			tell(err)
		}
		total += n
		if db.cfg.bugs.Has(bugs.SweepCountsLast) {
			total = n
		}
		if err != nil || !more || (stop != nil && stop()) {
			return total, err
		}
	}
}

// sweepTxn deletes keys expired at cutoff in one transaction of steps, and
// reports how many and whether more may be left. With a verb queued when it
// begins it runs one step in autocommit (sweepOneStep); otherwise it
// commits after the step during which a verb queued for the lock, once its steps took
// sweepTxnTime, or after sweepTxnRows rows. It reads the clock itself at
// its start and after its COMMIT, and nowhere else (a benchmark's probe
// times its transactions by those two reads). With a sweep observer it
// returns tell, to be called with the sweep's final error once its commit
// is synced (sweep does, after do). Callers hold mu.
func (db *DB) sweepTxn(ctx context.Context, cutoff int64) (n int, more bool, tell func(error), err error) {
	began := db.cfg.clock.Monotonic()
	var end func([]string, error)
	if o := db.cfg.sweeps; o != nil {
		end = o.Sweeping(cutoff, false)
	}
	var keys []string
	pages := db.pagesWritten()
	if db.q.waiting() {
		// A verb queued while this batch waited its turn: the
		// transaction would end after its first step. That step runs
		// alone, in autocommit, its COMMIT in the statement, sized with
		// it (sweepTook): the waiting verb waits for one statement, not
		// for BEGIN, a step and COMMIT as three.
		var limit int
		n, limit, err = db.sweepOneStep(ctx, cutoff, &keys)
		more = err == nil && n == limit
		tell = db.sweepEnd(end, keys, n, pages)
		db.cfg.clock.Monotonic() // the second of sweepTxn's two clock reads (statebench's probe)
		return n, more, tell, err
	}
	n, more, yielded, stepsEnd, err := db.sweepSteps(ctx, cutoff, began, &keys)
	if err == nil {
		_, err = db.st.commit.ExecContext(context.WithoutCancel(ctx))
		err = classify(ctx, err)
	}
	if err != nil {
		_, _ = db.st.rollback.ExecContext(context.WithoutCancel(ctx))
		n, more, keys = 0, false, nil
	}
	tell = db.sweepEnd(end, keys, n, pages)
	// A verb waited through this COMMIT: if it took longer than a step
	// should, the steps write too many pages for the COMMIT that follows
	// one; make them smaller.
	if committed := db.cfg.clock.Monotonic(); yielded && committed-stepsEnd > sweepBatchTime && db.sweepRows > 1 {
		db.sweepRows /= 2
	}
	return n, more, tell, err
}

// sweepOneStep runs one step of up to sweepLimit rows in autocommit, a
// sweep transaction of one statement, and sizes the next step by its time,
// COMMIT included, and returns the rows it deleted and the most it could
// have. On an error it deleted nothing: the statement rolled back. Callers
// hold mu.
func (db *DB) sweepOneStep(ctx context.Context, cutoff int64, keys *[]string) (n, limit int, err error) {
	limit = db.sweepLimit()
	n, took, err := db.sweepStep(ctx, cutoff, limit, keys)
	if err != nil {
		*keys = nil
		return 0, limit, err
	}
	db.sweepTook(took)
	return n, limit, nil
}

// sweepEnd counts the pages a sweep transaction wrote toward the next
// background checkpoint (pages: pagesWritten before it began) and returns
// what tells the sweep observer, if any, the keys it deleted (nil after an
// error) and its final error. Callers hold mu.
func (db *DB) sweepEnd(end func([]string, error), keys []string, n, pages int) (tell func(error)) {
	if end != nil {
		tell = func(err error) {
			if err != nil {
				keys = nil
			}
			end(keys, err)
		}
	}
	if n > 0 {
		w := sweepBatchWrites
		if after := db.pagesWritten(); pages >= 0 && after >= pages {
			w = max(w, after-pages)
		}
		db.bg.ckpt.wrote(w)
	}
	return tell
}

// sweepSteps begins sweepTxn's transaction and runs its steps, and reports
// the rows deleted, whether more may be left, whether it stopped because a
// verb was queued, and the clock's time after the last step. On an error
// the caller rolls back. Callers hold mu.
func (db *DB) sweepSteps(ctx context.Context, cutoff int64, began time.Duration, keys *[]string) (n int, more, yielded bool, at time.Duration, err error) {
	if _, err := db.st.begin.ExecContext(ctx); err != nil {
		return 0, false, false, began, classify(ctx, err)
	}
	for {
		limit := db.sweepLimit()
		k, took, err := db.sweepStep(ctx, cutoff, limit, keys)
		if err != nil {
			return n, false, false, began, err
		}
		db.sweepTook(took)
		n += k
		at = db.cfg.clock.Monotonic()
		if k < limit {
			return n, false, false, at, nil
		}
		if db.q.waiting() {
			return n, true, true, at, nil
		}
		if n >= sweepTxnRows || at-began >= sweepTxnTime {
			return n, true, false, at, nil
		}
		if s := db.cfg.sched; s != nil {
			s.Wait(nil) // a step is a scheduling point: a verb may queue meanwhile
		}
	}
}

// sweepStep runs one DELETE of up to limit keys expired at cutoff inside
// the sweep's transaction, appending the keys it deleted to keys when a
// sweep observer wants them, and returns how long it took by the clock.
// Callers hold mu.
func (db *DB) sweepStep(ctx context.Context, cutoff int64, limit int, keys *[]string) (int, time.Duration, error) {
	began := db.cfg.clock.Monotonic()
	n, err := db.sweepStatement(ctx, cutoff, limit, keys)
	return n, db.cfg.clock.Monotonic() - began, err
}

// sweepStatement runs sweepSQL (sweepKeysSQL for an observer, appending
// the keys it deleted to keys) with cutoff and limit.
func (db *DB) sweepStatement(ctx context.Context, cutoff int64, limit int, keys *[]string) (int, error) {
	if db.cfg.bugs.Has(bugs.SweepEarly) {
		cutoff++
	}
	if db.cfg.sweeps == nil {
		res, err := db.st.sweep.ExecContext(ctx, cutoff, limit)
		if err != nil {
			return 0, classify(ctx, err)
		}
		n, err := res.RowsAffected()
		return int(n), classify(ctx, err)
	}
	n := 0
	rs, err := db.st.sweepKeys.QueryContext(ctx, cutoff, limit)
	if err == nil {
		for rs.Next() {
			var k string
			if err = rs.Scan(&k); err != nil {
				break
			}
			*keys = append(*keys, k)
			n++
		}
		err = errors.Join(err, rs.Err(), rs.Close())
	}
	return n, classify(ctx, err)
}

// sweepLimit returns the rows the next sweep step may delete. Callers
// hold mu.
func (db *DB) sweepLimit() int {
	if db.sweepRows == 0 {
		db.sweepRows = min(inlineSweepRows, db.cfg.sweepStepRows)
	}
	return db.sweepRows
}

// sweepTook adapts the step size to how long the last step took, by the
// injected clock (a simulator's stands still: steps grow to the bound).
// Callers hold mu.
func (db *DB) sweepTook(d time.Duration) {
	switch {
	case d > sweepBatchTime && db.sweepRows > 1:
		db.sweepRows /= 2
	case d < sweepBatchTime/2 && db.sweepRows < db.cfg.sweepStepRows:
		db.sweepRows = min(2*db.sweepRows, db.cfg.sweepStepRows)
	}
}

// sweepPause is how long the background sweeper waits after a pass that
// deleted n rows: the sweep interval, or a tenth of it after a pass that
// found a backlog, so that expiry keeps up with a handle that sets keys
// faster than one pass a second sweeps them.
func sweepPause(interval time.Duration, n int) time.Duration {
	if n >= sweepBusyRows {
		return interval / sweepBusyDivisor
	}
	return interval
}

// sweepAlone deletes up to limit keys expired at cutoff in one autocommit
// statement, told to the sweep observer as one sweep: the inline sweep.
// Callers hold mu.
func (db *DB) sweepAlone(ctx context.Context, cutoff int64, limit int) (int, error) {
	var end func([]string, error)
	if o := db.cfg.sweeps; o != nil {
		end = o.Sweeping(cutoff, true)
	}
	var keys []string
	n, err := db.sweepStatement(ctx, cutoff, limit, &keys)
	if end != nil {
		end(keys, err)
	}
	return n, err
}

// afterWrite checkpoints when due, and sweeps a small batch every
// inlineSweepEvery writes, more often while those batches find a backlog
// and the background sweeper runs (inlineAssistDivisor), so a busy handle reclaims expired keys even
// without the background sweeper, and as fast as it writes them. Its
// errors are not the verb's: a fatal one ends the handle for the next call.
// WithoutBackground turns it off too: a simulator sweeps only when it says.
// Callers hold mu.
func (db *DB) afterWrite(ctx context.Context, now int64) {
	db.checkpointIfDue(ctx)
	if !db.cfg.background {
		return
	}
	db.writes++
	every, limit := db.cfg.inlineSweepEvery, min(db.sweepLimit(), inlineSweepRows)
	if db.sweepBehind {
		every, limit = max(1, every/inlineAssistDivisor), inlineAssistRows
	}
	if db.writes < every {
		return
	}
	db.writes = 0
	n, err := db.sweepAlone(ctx, now, limit)
	db.sweepBehind = err == nil && n == limit && db.cfg.sweepInterval > 0
	db.note(err)
}
