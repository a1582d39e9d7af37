package state_test

// The engine under faults: injected write, sync and read errors
// end the handle with ErrIO and are never retried as if nothing happened;
// reopening recovers a consistent file; a full disk fails the transaction
// whole with ErrDiskFull and the handle carries on once space is back; one
// process's crash leaves the others working. Every test runs on a
// faults.MemFS, so every fault falls where the test puts it.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
)

// fltPath is the file's name on the simulated disk.
const fltPath = "faults.state"

// fltMachine is one simulated machine: a disk and a clock its processes
// share.
type fltMachine struct {
	t     *testing.T
	ctx   context.Context
	m     *faults.MemFS
	clock *faults.Clock
}

func newFltMachine(t *testing.T) *fltMachine {
	return &fltMachine{t: t, ctx: t.Context(), m: faults.NewMemFS(1), clock: newClock()}
}

// open starts process pid on a fresh view of the disk; the test closes it
// at its end.
func (fm *fltMachine) open(pid int, opts ...state.Option) *state.DB {
	fm.t.Helper()
	all := append([]state.Option{state.WithFS(fm.m.Process(pid)), state.WithClock(fm.clock), state.WithoutBackground()}, opts...)
	db, err := state.Open(fltPath, all...)
	require.NoError(fm.t, err)
	fm.t.Cleanup(func() { _ = db.Close() })
	return db
}

// get returns the value's text, or "<absent>".
func (fm *fltMachine) get(db *state.DB, key string) string {
	fm.t.Helper()
	v, err := db.Get(fm.ctx, key)
	if errors.Is(err, state.ErrNotFound) {
		return "<absent>"
	}
	require.NoError(fm.t, err)
	return v.String()
}

// tokens returns every lease's token, by name.
func (fm *fltMachine) tokens(db *state.DB) map[string]int64 {
	fm.t.Helper()
	out := map[string]int64{}
	require.NoError(fm.t, db.Leases(fm.ctx, true, func(l state.LeaseInfo) error {
		out[l.Name] = l.Token
		return nil
	}))
	return out
}

// check requires Check to find nothing wrong with the file.
func (fm *fltMachine) check(db *state.DB) {
	fm.t.Helper()
	findings, err := db.Check(fm.ctx)
	require.NoError(fm.t, err)
	require.Empty(fm.t, findings)
}

// fltIO is the disk calls a MemFS has served.
type fltIO struct{ reads, writes, syncs, truncates int64 }

func fltIOOf(m *faults.MemFS) fltIO {
	s := m.Stats()
	return fltIO{s.Reads, s.Writes, s.Syncs, s.Truncates}
}

// fltEveryCall calls every method of db that reaches the file and returns
// each one's error, by method name. l is a lease db granted.
func fltEveryCall(ctx context.Context, db *state.DB, l *state.Lease) map[string]error {
	held := *l // Renew would move the caller's deadline
	errs := map[string]error{}
	_, errs["Get"] = db.Get(ctx, "a")
	errs["Set"] = db.Set(ctx, "a", "x")
	_, errs["Del"] = db.Del(ctx, "a")
	_, errs["Incr"] = db.Incr(ctx, "n")
	_, errs["IncrBy"] = db.IncrBy(ctx, "n", 5)
	_, errs["Decr"] = db.Decr(ctx, "n")
	_, errs["DecrBy"] = db.DecrBy(ctx, "n", 5)
	_, errs["CAS"] = db.CAS(ctx, "a", "1", "2")
	_, errs["Expire"] = db.Expire(ctx, "a", time.Minute)
	_, errs["TTL"] = db.TTL(ctx, "a")
	_, errs["Lease"] = db.Lease(ctx, "other", "p", time.Minute)
	errs["Renew"] = db.Renew(ctx, &held, time.Minute)
	errs["Release"] = db.Release(ctx, &held)
	errs["Update"] = db.Update(ctx, func(tx *state.Tx) error { return tx.Set("a", "y") })
	_, errs["Sweep"] = db.Sweep(ctx)
	errs["Scan"] = db.Scan(ctx, "", true, func(state.KeyInfo) error { return nil })
	errs["Leases"] = db.Leases(ctx, true, func(state.LeaseInfo) error { return nil })
	_, errs["Stats"] = db.Stats(ctx)
	_, errs["Check"] = db.Check(ctx)
	_ = db.IncrBuffered("n", 1) // see TestIncrBufferedRefusedAfterIOError
	errs["Flush"] = db.Flush(ctx)
	return errs
}

// requireRefused requires every call on the failed handle db to return
// ErrIO without reaching the disk.
func (fm *fltMachine) requireRefused(db *state.DB, l *state.Lease) {
	fm.t.Helper()
	before := fltIOOf(fm.m)
	errs := fltEveryCall(fm.ctx, db, l)
	for _, name := range slices.Sorted(maps.Keys(errs)) {
		assert.ErrorIs(fm.t, errs[name], state.ErrIO, "%s on a handle that met an I/O error", name)
	}
	assert.Equal(fm.t, before, fltIOOf(fm.m), "a failed handle touches the disk no more: nothing is retried")
}

// history commits what the fault tests start from: a key, a lease granted
// FULL, then three NORMAL increments. It returns the lease.
func (fm *fltMachine) history(db *state.DB) *state.Lease {
	fm.t.Helper()
	require.NoError(fm.t, db.Set(fm.ctx, "a", "1"))
	l, err := db.Lease(fm.ctx, "held", "p1", time.Hour)
	require.NoError(fm.t, err)
	require.Equal(fm.t, int64(1), l.Token)
	for range 3 {
		_, err := db.Incr(fm.ctx, "n")
		require.NoError(fm.t, err)
	}
	return l
}

// TestIOErrorEndsTheHandle injects one write or sync error into a verb: the
// verb fails with ErrIO, the handle refuses every later call with ErrIO
// without touching the disk, and a process that opens the file afresh finds
// it sound, with every acknowledged commit (after a power loss: everything
// up to the last FULL one) and nothing of the failed verb but what its
// outcome allows.
func TestIOErrorEndsTheHandle(t *testing.T) {
	faultsToInject := []struct {
		name string
		arm  func(m *faults.MemFS)
		verb func(ctx context.Context, db *state.DB) error
		// maybeApplied: the verb's commit may survive its error (a sync
		// failed after the commit's frames were written).
		maybeApplied bool
		// says is what the error must say, where the fault could be met
		// on more than one path.
		says string
	}{
		{name: "write error in incr", arm: func(m *faults.MemFS) { m.FailAt(faults.OpWrite, 1) },
			verb: fltIncr},
		{name: "write error in lease", arm: func(m *faults.MemFS) { m.FailAt(faults.OpWrite, 1) },
			verb: fltLease},
		{name: "sync error in a FULL lease commit", arm: func(m *faults.MemFS) { m.FailAt(faults.OpSync, 1) },
			verb: fltLease, maybeApplied: true},
		// A grant inside a transaction commits NORMAL, then the engine
		// syncs the WAL itself: that sync fails.
		{name: "sync error in a lease granted in a transaction", arm: func(m *faults.MemFS) { m.FailAt(faults.OpSync, 1) },
			verb: func(ctx context.Context, db *state.DB) error {
				return db.Update(ctx, func(tx *state.Tx) error {
					_, err := tx.Lease("L2", "p1", time.Minute)
					return err
				})
			}, maybeApplied: true, says: "the sync of " + fltPath + "-wal failed"},
		// The holder asks again for the deadline it has (the clock has not
		// moved): the grant writes nothing, and the engine syncs the WAL
		// itself for the commits before it: that sync fails.
		{name: "sync error in a grant that writes nothing", arm: func(m *faults.MemFS) { m.FailAt(faults.OpSync, 1) },
			verb: func(ctx context.Context, db *state.DB) error {
				_, err := db.Lease(ctx, "held", "p1", time.Hour)
				return err
			}, says: "the sync of " + fltPath + "-wal failed"},
		{name: "write error in a transaction", arm: func(m *faults.MemFS) { m.FailAt(faults.OpWrite, 1) },
			verb: func(ctx context.Context, db *state.DB) error {
				return db.Update(ctx, func(tx *state.Tx) error {
					if _, err := tx.Incr("n"); err != nil {
						return err
					}
					return tx.Set("b", strings.Repeat("b", 10_000))
				})
			}},
	}
	recoveries := []struct {
		name  string
		after func(m *faults.MemFS, db *state.DB)
		// keepsNormal: acknowledged NORMAL commits survive.
		keepsNormal bool
	}{
		{"close then reopen", func(_ *faults.MemFS, db *state.DB) { _ = db.Close() }, true},
		{"crash then reopen", func(m *faults.MemFS, db *state.DB) { m.Crash(1); _ = db.Close() }, true},
		{"power loss then reopen", func(m *faults.MemFS, db *state.DB) {
			m.PowerLoss(faults.LossDrop)
			m.Reboot()
			_ = db.Close()
		}, false},
	}
	for _, f := range faultsToInject {
		for _, r := range recoveries {
			t.Run(f.name+"/"+r.name, func(t *testing.T) {
				fm := newFltMachine(t)
				db := fm.open(1)
				l := fm.history(db)
				f.arm(fm.m)
				err := f.verb(fm.ctx, db)
				require.ErrorIs(t, err, state.ErrIO, "the injected fault surfaces as ErrIO")
				require.ErrorIs(t, err, faults.ErrInjected, "the error wraps its cause")
				if f.says != "" {
					require.ErrorContains(t, err, f.says)
				}
				fm.requireRefused(db, l)

				r.after(fm.m, db)
				fm.clock.Advance(2 * time.Hour) // every lease has expired
				db2 := fm.open(2)
				fm.check(db2)
				tokens := fm.tokens(db2)
				assert.Equal(t, int64(1), tokens["held"], "the acknowledged FULL grant survives")
				assert.Equal(t, "1", fm.get(db2, "a"), "a commit before the FULL grant survives")
				n := fm.get(db2, "n")
				switch {
				case r.keepsNormal && f.maybeApplied:
					assert.Contains(t, []string{"3", "4"}, n, "acknowledged increments survive; the failed one may")
				case r.keepsNormal:
					assert.Equal(t, "3", n, "acknowledged increments survive, the failed one left nothing")
				default:
					prefixes := []string{"<absent>", "1", "2", "3"}
					if f.maybeApplied {
						prefixes = append(prefixes, "4")
					}
					assert.Contains(t, prefixes, n, "what survives is a prefix")
				}
				if !f.maybeApplied {
					assert.Equal(t, "<absent>", fm.get(db2, "b"), "the failed transaction left nothing")
					assert.NotContains(t, tokens, "L2", "the failed grant left nothing")
				}

				// The new handle works, and tokens carry on past every grant.
				_, err = db2.Incr(fm.ctx, "n")
				require.NoError(t, err)
				l2, err := db2.Lease(fm.ctx, "held", "p2", time.Minute)
				require.NoError(t, err)
				assert.Equal(t, int64(2), l2.Token)
			})
		}
	}
}

func fltIncr(ctx context.Context, db *state.DB) error {
	_, err := db.Incr(ctx, "n")
	return err
}

func fltLease(ctx context.Context, db *state.DB) error {
	_, err := db.Lease(ctx, "L2", "p1", time.Minute)
	return err
}

// TestCheckpointSyncErrorEndsTheHandle: once the WAL passes 1000 pages,
// SQLite checkpoints it into the main file after a commit, syncing both, and
// its default hook drops the checkpoint's error. A sync that fails there
// must end the handle like any other, or the handle carries on as if the
// WAL it relies on were durable.
func TestCheckpointSyncErrorEndsTheHandle(t *testing.T) {
	fm := newFltMachine(t)
	db := fm.open(1)
	fm.history(db)
	fm.m.SetFailRate(faults.OpSync, 1) // from now on every sync fails
	big := strings.Repeat("x", 100_000)
	var err error
	for i := 0; err == nil && fm.m.Stats().InjectedErrors == 0; i++ {
		require.Less(t, i, 100, "10 MB written and SQLite never synced")
		err = db.Set(fm.ctx, fmt.Sprintf("big/%d", i), big)
	}
	if err == nil {
		// The sync failed after the verb's own commit: the verb may stand,
		// the handle may not.
		_, err = db.Incr(fm.ctx, "n")
	}
	require.ErrorIs(t, err, state.ErrIO, "a failed checkpoint sync ends the handle")
}

// TestIOErrorWrapsItsCause: the issue asks for ErrIO "wrapping the cause":
// the file system's own error, here the injected one, so that a caller (or
// an operator reading a log) can tell a failed sync from a failed read.
func TestIOErrorWrapsItsCause(t *testing.T) {
	for _, op := range []faults.Op{faults.OpWrite, faults.OpSync, faults.OpRead} {
		t.Run(op.String(), func(t *testing.T) {
			fm := newFltMachine(t)
			db, other := fm.open(1), fm.open(2)
			fm.history(db)
			require.NoError(t, other.Set(fm.ctx, "a", "2")) // db's next read reaches the disk
			fm.m.FailAt(op, 1)
			var err error
			if op == faults.OpRead {
				_, err = db.Get(fm.ctx, "a")
			} else {
				err = fltLease(fm.ctx, db)
			}
			require.ErrorIs(t, err, state.ErrIO)
			assert.ErrorIs(t, err, faults.ErrInjected, "ErrIO wraps the file system's error")
		})
	}
}

// TestOpenFailedDirSyncWrapsItsCause: Open syncs the WAL it made, and
// with it the WAL's directory; a directory sync that fails (EIO) fails the
// Open with ErrIO wrapping the file system's error and naming the directory
// sync, not a bare "disk I/O error". The next Open syncs the directory
// again, and a power loss after it keeps every FULL write.
func TestOpenFailedDirSyncWrapsItsCause(t *testing.T) {
	fm := newFltMachine(t)
	db := fm.open(1, state.WithSync(state.SyncFull))
	require.NoError(t, db.Set(fm.ctx, "a", "1"))
	require.NoError(t, db.Close()) // the last close deletes the WAL
	fm.m.FailAt(faults.OpSyncDir, 1)
	_, err := state.Open(fltPath, state.WithFS(fm.m.Process(2)), state.WithClock(fm.clock), state.WithoutBackground())
	require.ErrorIs(t, err, state.ErrIO)
	assert.ErrorIs(t, err, faults.ErrInjected, "ErrIO wraps the file system's error")
	assert.Contains(t, err.Error(), "sync directory")
	require.EqualValues(t, 1, fm.m.Stats().InjectedDirSyncErrors)

	db = fm.open(3, state.WithSync(state.SyncFull))
	require.NoError(t, db.Set(fm.ctx, "b", "2"))
	fm.m.PowerLoss(faults.LossDrop)
	fm.m.Reboot()
	db = fm.open(4)
	assert.Equal(t, "1", fm.get(db, "a"))
	assert.Equal(t, "2", fm.get(db, "b"), "the FULL write after the failed directory sync survives")
	fm.check(db)
}

// TestIncrBufferedRefusedAfterIOError: ErrIO's promise is that the handle
// refuses every further call. IncrBuffered touches no disk, but accepting
// an increment a failed handle can never write would lose it silently.
func TestIncrBufferedRefusedAfterIOError(t *testing.T) {
	fm := newFltMachine(t)
	db := fm.open(1)
	fm.history(db)
	fm.m.FailAt(faults.OpWrite, 1)
	require.ErrorIs(t, fltIncr(fm.ctx, db), state.ErrIO)
	assert.ErrorIs(t, db.IncrBuffered("n", 1), state.ErrIO, "IncrBuffered on a failed handle")
}

// TestReadErrorEndsTheHandle: a read error is an I/O error like any other.
// Another process changes the file, so the next read must reach the disk.
func TestReadErrorEndsTheHandle(t *testing.T) {
	fm := newFltMachine(t)
	p1, p2 := fm.open(1), fm.open(2)
	l := fm.history(p1)
	require.Equal(t, "1", fm.get(p1, "a"))
	require.NoError(t, p2.Set(fm.ctx, "a", "2"))

	fm.m.FailAt(faults.OpRead, 1)
	_, err := p1.Get(fm.ctx, "a")
	require.ErrorIs(t, err, state.ErrIO)
	fm.requireRefused(p1, l)

	// The other process never noticed.
	n, err := p2.Incr(fm.ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, int64(4), n)
	require.NoError(t, p1.Close())
	p3 := fm.open(3)
	fm.check(p3)
	assert.Equal(t, "2", fm.get(p3, "a"))
	assert.Equal(t, "4", fm.get(p3, "n"))
}

// TestSyncErrorLosesNoLaterFullCommit: after a failed sync the writes it
// was to make durable stay readable but never reach the disk (Linux's
// fsyncgate, as MemFS models it). The handle ends, and ErrIO says to reopen
// the file; whatever a handle acknowledges after that, FULL, must survive a
// power loss with every commit before it, or a fencing token is reissued.
// Refusing the grant is safe too.
func TestSyncErrorLosesNoLaterFullCommit(t *testing.T) {
	next := []struct {
		name string
		// handle returns the handle that grants after the failure.
		handle func(fm *fltMachine, failed, other *state.DB) *state.DB
	}{
		{"reopen after close", func(fm *fltMachine, failed, _ *state.DB) *state.DB {
			_ = failed.Close()
			return fm.open(1)
		}},
		{"restart after a crash", func(fm *fltMachine, failed, _ *state.DB) *state.DB {
			fm.m.Crash(1)
			_ = failed.Close()
			return fm.open(1)
		}},
		{"reopen beside the failed handle", func(fm *fltMachine, _, _ *state.DB) *state.DB {
			return fm.open(3)
		}},
		{"another process carries on", func(_ *fltMachine, _, other *state.DB) *state.DB {
			return other
		}},
	}
	for _, c := range next {
		t.Run(c.name, func(t *testing.T) {
			fm := newFltMachine(t)
			p1, p2 := fm.open(1), fm.open(2)
			for range 3 {
				_, err := p1.Incr(fm.ctx, "n") // NORMAL: in the WAL, not synced
				require.NoError(t, err)
			}
			fm.m.FailAt(faults.OpSync, 1)
			_, err := p1.Lease(fm.ctx, "L1", "p1", time.Minute)
			require.ErrorIs(t, err, state.ErrIO)

			l, err := c.handle(fm, p1, p2).Lease(fm.ctx, "L3", "p3", time.Minute)
			if err != nil {
				require.ErrorIs(t, err, state.ErrIO, "refusing is safe: nothing was acknowledged")
				return
			}
			fm.m.PowerLoss(faults.LossDrop)
			fm.m.Reboot()
			p9 := fm.open(9)
			fm.check(p9)
			assert.Equal(t, l.Token, fm.tokens(p9)["L3"], "the grant acknowledged after the sync error survives the power loss")
			assert.Equal(t, "3", fm.get(p9, "n"), "and so does every commit before it")
		})
	}
}

// TestReadsWorkOnAFullDisk: a full disk fails writes; reads go on while the
// file's clock high-water mark covers their time. Every verb first moves the
// mark when it is due, a write: then a Get fails with ErrDiskFull rather
// than use a time the file cannot vouch for, and works again once space is
// back.
func TestReadsWorkOnAFullDisk(t *testing.T) {
	fm := newFltMachine(t)
	db := fm.open(1)
	require.NoError(t, db.Set(fm.ctx, "k", "v"))
	fm.m.SetWriteBudget(0)
	v, err := db.Get(fm.ctx, "k")
	require.NoError(t, err, "Get on a full disk, within the high-water mark's lead")
	assert.Equal(t, "v", v.String())

	// Once the mark is due, a read needs it written: no verb may use a
	// time a restart could go back behind (sim TestReadOnFullDiskKeepsHighWater).
	fm.clock.Advance(time.Second)
	_, err = db.Get(fm.ctx, "k")
	require.ErrorIs(t, err, state.ErrDiskFull, "Get on a full disk once the mark is due")
	fm.m.SetWriteBudget(-1)
	v, err = db.Get(fm.ctx, "k")
	require.NoError(t, err, "and it works again once space is back")
	assert.Equal(t, "v", v.String())
}

// TestDiskFull: a write past the disk's space fails the verb with
// ErrDiskFull, the transaction leaves nothing behind, the handle stays
// usable, and once space is back it works on.
func TestDiskFull(t *testing.T) {
	t.Run("every verb", func(t *testing.T) {
		fm := newFltMachine(t)
		db := fm.open(1)
		require.NoError(t, db.Set(fm.ctx, "k", "old"))
		_, err := db.Incr(fm.ctx, "n")
		require.NoError(t, err)

		fm.m.SetWriteBudget(0)
		fm.clock.Advance(time.Second) // the high-water mark is due too
		assert.ErrorIs(t, db.Set(fm.ctx, "k", "new"), state.ErrDiskFull)
		_, err = db.Incr(fm.ctx, "n")
		assert.ErrorIs(t, err, state.ErrDiskFull)
		_, err = db.Lease(fm.ctx, "L", "p1", time.Minute)
		assert.ErrorIs(t, err, state.ErrDiskFull)
		err = db.Update(fm.ctx, func(tx *state.Tx) error {
			if err := tx.Set("k", "tx"); err != nil {
				return err
			}
			_, err := tx.Lease("L", "p1", time.Minute)
			return err
		})
		assert.ErrorIs(t, err, state.ErrDiskFull)
		assert.NotErrorIs(t, err, state.ErrIO, "a full disk is no I/O error: the handle lives")

		// Space comes back (reads on a full disk: TestReadsWorkOnAFullDisk).
		// Nothing of the failed verbs is there, and the same handle works.
		fm.m.SetWriteBudget(-1)
		assert.Equal(t, "old", fm.get(db, "k"))
		assert.Equal(t, "1", fm.get(db, "n"))
		assert.Empty(t, fm.tokens(db), "no grant, so no token was used up")
		require.NoError(t, db.Set(fm.ctx, "k", "new"))
		n, err := db.Incr(fm.ctx, "n")
		require.NoError(t, err)
		assert.Equal(t, int64(2), n)
		l, err := db.Lease(fm.ctx, "L", "p1", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, int64(1), l.Token)

		require.NoError(t, db.Close())
		db2 := fm.open(2)
		fm.check(db2)
		assert.Equal(t, "new", fm.get(db2, "k"))
		assert.Equal(t, "2", fm.get(db2, "n"))
	})

	t.Run("mid-commit, then a power loss", func(t *testing.T) {
		fm := newFltMachine(t)
		db := fm.open(1)
		require.NoError(t, db.Set(fm.ctx, "k", "old"))
		big := strings.Repeat("x", 3000)
		write := func(tx *state.Tx) error {
			for i := range 8 {
				if err := tx.Set(fmt.Sprintf("big/%d", i), big); err != nil {
					return err
				}
			}
			return tx.Set("k", "tx")
		}
		fm.m.SetWriteBudget(10_000) // a few of the commit's WAL frames fit
		err := db.Update(fm.ctx, write)
		require.ErrorIs(t, err, state.ErrDiskFull)
		assert.Positive(t, fm.m.Stats().BytesWritten, "the commit wrote part of itself first")
		assert.Equal(t, "old", fm.get(db, "k"), "the failed transaction left nothing")
		assert.Equal(t, "<absent>", fm.get(db, "big/0"))

		// Space comes back: the same handle commits, and a FULL commit
		// makes it durable on top of whatever the failed one left.
		fm.m.SetWriteBudget(-1)
		require.NoError(t, db.Update(fm.ctx, write))
		l, err := db.Lease(fm.ctx, "L", "p1", time.Minute)
		require.NoError(t, err)
		fm.m.PowerLoss(faults.LossTear)
		fm.m.Reboot()
		db2 := fm.open(2)
		fm.check(db2)
		assert.Equal(t, "tx", fm.get(db2, "k"))
		assert.Equal(t, big, fm.get(db2, "big/7"))
		assert.Equal(t, l.Token, fm.tokens(db2)["L"])
	})

	t.Run("in the checkpoint at close, then a power loss", func(t *testing.T) {
		fm := newFltMachine(t)
		db := fm.open(1)
		for i := range 20 {
			require.NoError(t, db.Set(fm.ctx, fmt.Sprintf("k/%d", i), strings.Repeat("v", 1000)))
		}
		_, err := db.Lease(fm.ctx, "L", "p1", time.Minute) // FULL: all of it is durable in the WAL
		require.NoError(t, err)
		fm.m.SetWriteBudget(0) // the last close's checkpoint cannot copy the WAL
		closeErr := db.Close()
		t.Logf("close with a full disk: %v", closeErr)
		fm.m.SetWriteBudget(-1)
		fm.m.PowerLoss(faults.LossDrop)
		fm.m.Reboot()
		db2 := fm.open(2)
		fm.check(db2)
		assert.Equal(t, strings.Repeat("v", 1000), fm.get(db2, "k/19"), "a failed checkpoint loses nothing")
		assert.Equal(t, int64(1), fm.tokens(db2)["L"])
	})
}

// TestCrashOfOneProcess: a crashed process's handle fails, its locks go
// with it (even the write lock in the middle of a transaction), the other
// processes carry on, and everything it committed stays: the crash takes
// the process, not the machine's page cache.
func TestCrashOfOneProcess(t *testing.T) {
	fm := newFltMachine(t)
	p1, p2 := fm.open(1), fm.open(2)
	l := fm.history(p1) // p1 holds "held" for an hour
	_, err := p2.Incr(fm.ctx, "n")
	require.NoError(t, err)

	// p1 crashes inside a transaction, holding the write lock.
	err = p1.Update(fm.ctx, func(tx *state.Tx) error {
		if err := tx.Set("partial", "yes"); err != nil {
			return err
		}
		fm.m.Crash(1)
		return nil
	})
	require.Error(t, err, "a transaction whose process died does not commit")
	assert.ErrorIs(t, err, state.ErrIO)
	fm.requireRefused(p1, l)

	// p2 writes at once: p1's locks died with it.
	n, err := p2.Incr(fm.ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, int64(5), n, "p1's acknowledged increments are there")
	assert.Equal(t, "<absent>", fm.get(p2, "partial"), "p1's open transaction left nothing")
	// The crash ended no lease: the TTL does, and the token goes on.
	_, err = p2.Lease(fm.ctx, "held", "p2", time.Minute)
	require.ErrorIs(t, err, state.ErrLeaseHeld)
	fm.clock.Advance(time.Hour)
	l2, err := p2.Lease(fm.ctx, "held", "p2", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, l.Token+1, l2.Token)

	// p1 restarts on a new view and finds everything.
	_ = p1.Close()
	p1 = fm.open(1)
	fm.check(p1)
	assert.Equal(t, "5", fm.get(p1, "n"))
	assert.Equal(t, "1", fm.get(p1, "a"))
	assert.Equal(t, l2.Token, fm.tokens(p1)["held"])
}
