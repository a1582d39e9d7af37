package sim

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
)

// Engine behaviours the simulator found, pinned as small tests.

// TestFlushOnFullDiskKeepsDeltas: Flush documents that a flush refused by a
// full disk keeps its deltas for the next flush. Found by seeds 147 and 50
// (now in sim/testdata/regressions.txt): when the refusal came from the
// high-water mark's write before the flush transaction, the deltas were
// lost. Fixed in state/buffered.go.
func TestFlushOnFullDiskKeepsDeltas(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	clock := faults.NewClock(time.UnixMilli(1_800_000_000_000))
	db, err := state.Open("f.state", state.WithFS(m.Process(1)), state.WithClock(clock), state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.IncrBuffered("n", 2))
	clock.Advance(time.Hour) // past the high-water mark: the next call rewrites it
	m.SetWriteBudget(0)
	require.ErrorIs(t, db.Flush(ctx), state.ErrDiskFull)
	m.SetWriteBudget(-1)
	require.NoError(t, db.Flush(ctx))
	v, err := db.Get(ctx, "n")
	require.NoError(t, err, "the deltas of the refused flush were lost")
	n, _ := v.Int()
	require.Equal(t, int64(2), n)
}

// TestUpdateGrantOnFullDiskLeavesNothing: ErrDiskFull promises that the
// failed transaction left nothing behind. Found by seed 279: an Update that
// granted a lease committed, then made the commit durable with a second
// write; when only that second write found the disk full, Update returned
// ErrDiskFull although its writes (and the token) were committed. The
// engine now syncs the WAL itself instead (state/walsync.go), with no
// second write; whichever write the disk refuses, Update returns
// ErrDiskFull with nothing left, or ErrIO and the handle ends.
func TestUpdateGrantOnFullDiskLeavesNothing(t *testing.T) {
	ctx := t.Context()
	type outcome struct {
		m    *faults.MemFS
		db   *state.DB
		used int64
		err  error
	}
	run := func(budget int64) outcome {
		m := faults.NewMemFS(1)
		clock := faults.NewClock(time.UnixMilli(1_800_000_000_000))
		db, err := state.Open("u.state", state.WithFS(m.Process(1)), state.WithClock(clock), state.WithoutBackground())
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		before := m.Stats().BytesWritten
		m.SetWriteBudget(budget)
		err = db.Update(ctx, func(tx *state.Tx) error {
			if _, err := tx.Lease("L", "a", time.Minute); err != nil {
				return err
			}
			_, err := tx.IncrBy("n", 1)
			return err
		})
		m.SetWriteBudget(-1)
		return outcome{m, db, m.Stats().BytesWritten - before, err}
	}
	all := run(-1)
	require.NoError(t, all.err)
	require.Positive(t, all.used)
	fullDisk := 0
	for budget := all.used - 1; budget >= 0; budget -= min(budget, 97) {
		o := run(budget)
		require.Error(t, o.err, "budget %d of %d bytes", budget, all.used)
		if errors.Is(o.err, state.ErrIO) {
			require.NotErrorIs(t, o.err, state.ErrDiskFull, "budget %d", budget)
			_, err := o.db.Get(ctx, "n")
			require.ErrorIs(t, err, state.ErrIO, "budget %d: the handle ended", budget)
		} else {
			require.ErrorIs(t, o.err, state.ErrDiskFull, "budget %d", budget)
			fullDisk++
			// Another process finds nothing of it: no key, no token.
			db2, err := state.Open("u.state", state.WithFS(o.m.Process(2)), state.WithoutBackground())
			require.NoError(t, err)
			_, err = db2.Get(ctx, "n")
			require.ErrorIs(t, err, state.ErrNotFound, "budget %d: ErrDiskFull promises nothing committed", budget)
			l, err := db2.Lease(ctx, "L", "b", time.Minute)
			require.NoError(t, err)
			require.Equal(t, int64(1), l.Token, "budget %d: the refused grant's token was never handed out", budget)
			require.NoError(t, db2.Close())
		}
		if budget == 0 {
			break
		}
	}
	require.Positive(t, fullDisk, "some budget must refuse the transaction with ErrDiskFull")
}

// TestReadOnFullDiskKeepsHighWater: the high-water mark covers every time
// a handle used, reads included, so time never goes back across a restart.
// Found by seeds 4, 506, 684, 907 and 988: a read that runs while the mark
// cannot be written (the disk is full) goes on at a time the file does not
// hold; a process that opens after the wall clock stepped back then starts
// behind it.
func TestReadOnFullDiskKeepsHighWater(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	clock := faults.NewClock(time.UnixMilli(1_800_000_000_000))
	db, err := state.Open("h.state", state.WithFS(m.Process(1)), state.WithClock(clock), state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	clock.Advance(time.Hour) // past the mark: the next call must move it
	m.SetWriteBudget(0)
	used := db.Now()
	_, err = db.Get(ctx, "x")
	m.SetWriteBudget(-1)
	if errors.Is(err, state.ErrDiskFull) {
		return // the read was refused: no time was used, the promise holds
	}
	require.ErrorIs(t, err, state.ErrNotFound)
	later := clock.Restart()
	later.StepWall(-2 * time.Hour)
	db2, err := state.Open("h.state", state.WithFS(m.Process(2)), state.WithClock(later), state.WithoutBackground())
	require.NoError(t, err)
	defer db2.Close()
	require.False(t, db2.Now().Before(used), "a read used %d; a later process starts at %d", used.UnixMilli(), db2.Now().UnixMilli())
}

// TestRefusedWriteStaysRefusedAfterACrash: ErrDiskFull promises nothing
// left, after a crash too. Found by seed 7300502: a transaction of two
// pages failed at the second on a full disk; the same change alone then
// wrote its frame's header where the first attempt had written the very
// same page, its page write was refused, and the frame was whole on disk,
// so the process that recovered the WAL after a crash read the refused
// write. The engine now cuts the WAL back to its last committed frame
// after a refused write (state/walfull.go). Every budget from none to what
// the two writes need is tried.
func TestRefusedWriteStaysRefusedAfterACrash(t *testing.T) {
	ctx := t.Context()
	type outcome struct{ update, set error }
	run := func(budget int64) (outcome, string) {
		m := faults.NewMemFS(1)
		clock := faults.NewClock(time.UnixMilli(1_800_000_000_000))
		db, err := state.Open("r.state", state.WithFS(m.Process(1)), state.WithClock(clock), state.WithoutBackground())
		require.NoError(t, err)
		// Abandoned after the crash, closed at the end: SQLite's page
		// cache is the process's, and a connection left open would change
		// when later runs' connections spill pages.
		t.Cleanup(func() { _ = db.Close() })
		// Keys on two leaves, so the Update writes two pages and the Set
		// alone the first of them, the same bytes.
		for i := range 120 {
			require.NoError(t, db.Set(ctx, fmt.Sprintf("k%03d", i), strings.Repeat("v", 60)))
		}
		m.SetWriteBudget(budget)
		var o outcome
		o.update = db.Update(ctx, func(tx *state.Tx) error {
			if err := tx.Set("k000", "new"); err != nil {
				return err
			}
			return tx.Set("k119", "new")
		})
		o.set = db.Set(ctx, "k000", "new")
		m.Crash(1) // the handle is abandoned, as a crash leaves it
		m.SetWriteBudget(-1)
		db2, err := state.Open("r.state", state.WithFS(m.Process(1)), state.WithoutBackground())
		require.NoError(t, err)
		defer db2.Close()
		v, err := db2.Get(ctx, "k000")
		require.NoError(t, err)
		return o, v.String()
	}
	refused := 0
	for budget := int64(0); budget <= 3*(4096+24); budget += 48 {
		o, got := run(budget)
		if o.update == nil || o.set == nil {
			continue
		}
		require.ErrorIs(t, o.update, state.ErrDiskFull, "budget %d", budget)
		if !errors.Is(o.set, state.ErrDiskFull) {
			require.ErrorIs(t, o.set, state.ErrIO, "budget %d", budget)
			continue // the handle ended: the outcome is unknown
		}
		refused++
		require.NotEqual(t, "new", got, "budget %d: the Set answered ErrDiskFull is in the file after the crash", budget)
	}
	require.Positive(t, refused, "no budget refused both writes")
	t.Logf("%d budgets refused both writes", refused)
}
