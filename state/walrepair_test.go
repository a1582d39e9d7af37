package state_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncErrorKeys is how many keys cutAfterSyncError sets before the failed
// sync: NORMAL commits over many pages, with the index on expires_at.
const syncErrorKeys = 40

// cutAfterSyncError runs, for each loss mode and each n from 1 until next
// makes fewer than n disk calls: process 1 sets syncErrorKeys keys, then a
// FULL grant's WAL sync fails, so the frames of those commits stay readable
// but never reach the disk (fsyncgate) and no later sync writes them; then
// next(m, failed, open) runs with the power cut armed at its nth mutating
// disk call. After every cut the file must open sound and hold a prefix of
// the keys. It returns how many cuts fell inside next.
func cutAfterSyncError(t *testing.T, next func(m *faults.MemFS, failed *state.DB, open func(pid int) (*state.DB, error))) int {
	t.Helper()
	ctx := context.Background()
	cuts := 0
	for _, mode := range []faults.LossMode{faults.LossKeep, faults.LossTear} {
		for at := int64(1); ; at++ {
			m := faults.NewMemFS(uint64(at))
			clock := newClock()
			open := func(pid int) (*state.DB, error) {
				return state.Open("/sim/repair.state", state.WithFS(m.Process(pid)), state.WithClock(clock), state.WithoutBackground())
			}
			db, err := open(1)
			require.NoError(t, err)
			for i := range syncErrorKeys {
				require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300), state.TTL(time.Hour)))
			}
			m.FailAt(faults.OpSync, 1)
			_, err = db.Lease(ctx, "job", "a", time.Minute)
			require.ErrorIs(t, err, state.ErrIO)

			m.PowerLossAt(at, mode)
			next(m, db, open)
			if m.Powered() {
				break // next made fewer disk calls than at: every one was cut
			}
			cuts++
			what := fmt.Sprintf("%s cut at call %d", mode, at)
			m.Reboot()
			after, err := open(9)
			require.NoError(t, err, what)
			findings, err := after.Check(ctx)
			require.NoError(t, err)
			require.Empty(t, findings, what)
			requirePrefix(t, after, what)
			require.NoError(t, after.Close())
		}
	}
	return cuts
}

// requirePrefix requires keys k00.. to have survived as a prefix: once one
// is missing, every later one is too.
func requirePrefix(t *testing.T, db *state.DB, what string) {
	t.Helper()
	gone := -1
	for i := range syncErrorKeys {
		_, err := db.Get(context.Background(), fmt.Sprintf("k%02d", i))
		switch {
		case errors.Is(err, state.ErrNotFound) && gone < 0:
			gone = i
		case err == nil && gone >= 0:
			t.Fatalf("%s: k%02d survived but k%02d, set before it, did not", what, i, gone)
		default:
			require.True(t, err == nil || errors.Is(err, state.ErrNotFound), "%v", err)
		}
	}
}

// TestCheckpointAfterSyncErrorSurvivesPowerLoss: after the failed sync the
// process crashes, and its restart checkpoints that WAL into the file at
// Open; the power is cut at each disk call of the restart in turn. The
// restart makes the WAL durable before it copies it (walrepair.go).
// Without that the cut in the middle of the checkpoint leaves pages of the
// file newer than the rest ("row missing from index"), as statesim seed 6
// (-syncerror 0.005) found.
func TestCheckpointAfterSyncErrorSurvivesPowerLoss(t *testing.T) {
	cuts := cutAfterSyncError(t, func(m *faults.MemFS, failed *state.DB, open func(int) (*state.DB, error)) {
		m.Crash(1)
		_ = failed.Close()
		if restarted, err := open(2); err == nil {
			_ = restarted.Close()
		}
	})
	assert.Greater(t, cuts, 10, "the cuts fell inside the restart's repair and checkpoint")
}

// TestFailedHandleCloseSurvivesPowerLoss: the handle whose WAL sync failed
// is the file's last connection and closes; the power is cut at each disk
// call of that Close. SQLite's last connection checkpoints at close, and
// the one that saw the sync fail is never told again: the Close repairs
// the WAL and keeps a read-only connection open meanwhile.
func TestFailedHandleCloseSurvivesPowerLoss(t *testing.T) {
	cuts := cutAfterSyncError(t, func(_ *faults.MemFS, failed *state.DB, _ func(int) (*state.DB, error)) {
		_ = failed.Close()
	})
	assert.Greater(t, cuts, 2, "the cuts fell inside the failed handle's Close, its WAL repair included")
}

// TestBackgroundCheckpointAfterSyncErrorStops: the background checkpointer
// has its own connection, and it must have the WAL open before another
// process's WAL sync fails: then its own next sync reports the failure and
// it stops before writing the file. Had it opened the WAL after the
// failure (lazily, at its first checkpoint), its sync would succeed and it
// would copy the never-synced frames into the file, where a power cut in
// the middle leaves pages newer than the rest. The power is cut at each
// disk call after the checkpoint is due in turn; the file must stay sound.
func TestBackgroundCheckpointAfterSyncErrorStops(t *testing.T) {
	ctx := context.Background()
	const writes = 4000 // checkpointEvery: the write that asks for a background checkpoint
	for at := int64(1); at <= 3; at++ {
		m := faults.NewMemFS(uint64(at))
		clock := newClock()
		open := func(pid int, opts ...state.Option) *state.DB {
			db, err := state.Open("/sim/bg.state", append([]state.Option{state.WithFS(m.Process(pid)), state.WithClock(clock)}, opts...)...)
			require.NoError(t, err)
			return db
		}
		p1 := open(1, state.WithoutBackground())
		p2 := open(2, state.WithSweepInterval(0), state.WithFlushInterval(0))
		for i := range syncErrorKeys {
			require.NoError(t, p1.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300), state.TTL(time.Hour)))
		}
		m.FailAt(faults.OpSync, 1)
		_, err := p1.Lease(ctx, "job", "a", time.Minute)
		require.ErrorIs(t, err, state.ErrIO)
		m.Crash(1)

		for i := range writes - 2 {
			_, err := p2.Incr(ctx, "n")
			require.NoError(t, err, "write %d", i)
		}
		// The last write, which asks for the checkpoint, makes as many disk
		// calls as the one before it: the cut falls after them.
		before := m.Stats().Mutations()
		_, err = p2.Incr(ctx, "n")
		require.NoError(t, err)
		m.PowerLossAt(m.Stats().Mutations()-before+at, faults.LossKeep)
		_, err = p2.Incr(ctx, "n") // asks for the checkpoint
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			_, err := p2.Get(ctx, "n")
			return errors.Is(err, state.ErrIO) || !m.Powered()
		}, 20*time.Second, time.Millisecond, "the checkpoint met the failed sync or the power cut")
		_ = p2.Close()
		if m.Powered() {
			m.PowerLoss(faults.LossKeep)
		}
		m.Reboot()
		after := open(9, state.WithoutBackground())
		findings, err := after.Check(ctx)
		require.NoError(t, err)
		require.Empty(t, findings, "keep cut at call %d after the checkpoint was due", at)
		requirePrefix(t, after, fmt.Sprintf("cut at call %d", at))
		require.NoError(t, after.Close())
	}
}

// TestFailedOpenAfterAFailedRepairSurvivesPowerLoss: process 2 has
// commits in the WAL when process 1's Open repairs the WAL and the
// repair's sync fails, leaving a hole, and Open fails; process 2's next
// sync reports the failure, its handle fails, and it closes on a full
// disk, its own repair refused. Then process 3's Open finds no process on
// the file and the disk still full: its repair is refused and Open fails.
// The power is cut at each disk call of that Open in turn. Its last
// writable connection to close would checkpoint the hole into the file,
// and a cut in the middle tears a page the durable WAL no longer covers:
// they close while a read-only connection holds the file (releaseHandle).
// It fails when that connection closes first. (An idle read-only
// connection may hold no lock, which is why releaseHandle reads inside a
// transaction on it: TestGuardThatReadAnEmptyFileStopsTheCheckpoint.)
func TestFailedOpenAfterAFailedRepairSurvivesPowerLoss(t *testing.T) {
	ctx := context.Background()
	cuts := 0
	for _, mode := range []faults.LossMode{faults.LossKeep, faults.LossTear} {
		for at := int64(1); ; at++ {
			m := faults.NewMemFS(uint64(at))
			clock := newClock()
			open := func(pid int) (*state.DB, error) {
				return state.Open("/sim/repair.state", state.WithFS(m.Process(pid)), state.WithClock(clock))
			}
			p2, err := open(2)
			require.NoError(t, err)
			for i := range syncErrorKeys {
				require.NoError(t, p2.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300), state.TTL(time.Hour)))
			}
			m.FailAt(faults.OpSync, 1)
			_, err = open(1)
			require.ErrorIs(t, err, state.ErrIO, "process 1's repair could not sync the WAL")
			_, err = p2.Lease(ctx, "job", "a", time.Minute)
			require.ErrorIs(t, err, state.ErrIO, "process 2 is told at its next sync")
			m.SetWriteBudget(64 << 10) // room for a checkpoint's pages, not for the WAL's rewrite
			_ = p2.Close()

			m.PowerLossAt(at, mode)
			p3, err := open(3)
			m.SetWriteBudget(-1)
			if m.Powered() {
				require.ErrorIs(t, err, state.ErrDiskFull)
				break // the failed Open made fewer disk calls than at
			}
			if err == nil {
				_ = p3.Close()
			}
			cuts++
			what := fmt.Sprintf("%s cut at call %d", mode, at)
			m.Reboot()
			after, err := open(9)
			require.NoError(t, err, what)
			findings, err := after.Check(ctx)
			require.NoError(t, err)
			require.Empty(t, findings, what)
			requirePrefix(t, after, what)
			require.NoError(t, after.Close())
		}
	}
	assert.Greater(t, cuts, 0, "the cuts fell inside the failed Open")
}
