package main

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// naiveSweepSQL is statekit's sweep statement with a fixed batch: ?1 now,
// ?2 rows.
const naiveSweepSQL = `DELETE FROM kv WHERE rowid IN
(SELECT rowid FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?1 LIMIT ?2)`

// runNaiveSweep is the sweep scenario's control: rows expired rows in a
// plain SQLite file with statekit's table, deleted batch rows at a time by
// one DELETE each, on a database/sql handle of one connection that a
// goroutine running the naive upsert shares meanwhile, as statekit's
// sweep shares its handle with Incr, and checkpoints between DELETEs. Each DELETE is timed with a txnTimer,
// the wait for the connection included (an upsert, some 20 µs). What makes
// a plain DELETE of the same size slow on this machine makes statekit's
// slow too.
func runNaiveSweep(e *env, rows, batch int, deadline string) (*txnTimer, error) {
	path := e.path("sweep.naive.db")
	n, err := openNaive(path)
	if err != nil {
		return nil, err
	}
	defer n.close()
	n.db.SetMaxOpenConns(1)
	// No checkpoint inside a DELETE: SQLite's automatic one would sync in
	// the middle of the statements timed, where statekit's sweep never
	// checkpoints (its checkpoints run on a connection of their own). The
	// control checkpoints between statements instead, untimed, every
	// naiveSweepCheckpointEvery: a WAL left to grow makes every page
	// lookup search more of its index.
	if _, err := n.db.ExecContext(e.ctx, `PRAGMA wal_autocheckpoint=0`); err != nil {
		return nil, fmt.Errorf("naive sweep: %w", err)
	}
	e.logf("sweep: writing %d expired rows for the plain SQLite control", rows)
	if err := fill(path, rows, "expired:", deadline); err != nil {
		return nil, err
	}
	del, err := n.db.Prepare(naiveSweepSQL)
	if err != nil {
		return nil, fmt.Errorf("naive sweep: %w", err)
	}
	defer del.Close()

	var stop atomic.Bool
	var wg sync.WaitGroup
	var incrErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if _, err := n.doIncr(e.ctx, "counter"); err != nil {
				incrErr = err
				return
			}
		}
	}()
	var m txnTimer
	var sweepErr error
	for i := 1; ; i++ {
		if i%naiveSweepCheckpointEvery == 0 {
			if _, err := n.db.ExecContext(e.ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
				sweepErr = fmt.Errorf("naive sweep checkpoint: %w", err)
				break
			}
		}
		m.begin()
		res, err := del.ExecContext(e.ctx, sweepNow, batch)
		m.end()
		if err != nil {
			sweepErr = fmt.Errorf("naive sweep: %w", err)
			break
		}
		k, err := res.RowsAffected()
		if err != nil {
			sweepErr = fmt.Errorf("naive sweep: %w", err)
			break
		}
		if k < int64(batch) {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if sweepErr != nil {
		return nil, sweepErr
	}
	if incrErr != nil {
		return nil, fmt.Errorf("naive incr beside the sweep: %w", incrErr)
	}
	return &m, nil
}

// naiveSweepCheckpointEvery is how many DELETEs the control runs between
// two checkpoints: statekit's background checkpoint comes about every
// thousand sweep batches.
const naiveSweepCheckpointEvery = 1000

// sweepNow is the now of the naive sweep: after every deadline fill writes.
const sweepNow = int64(1) << 40
