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

// TestCheckpointAfterSyncErrorSurvivesPowerLoss: a WAL sync fails under a
// FULL grant, so the frames of the NORMAL commits before it stay readable
// but never reach the disk (fsyncgate), and no later sync writes them. The
// process crashes; its restart checkpoints that WAL into the file at Open.
// The power is cut at each disk call of that restart in turn, keeping or
// tearing what was not synced. After every cut the file must be sound and
// hold a prefix of the commits: the restart makes the WAL durable before
// it copies it (walrepair.go). Without that the cut in the middle of the
// checkpoint leaves pages of the file newer than the rest ("row missing
// from index"), as statesim seed 6 (-syncerror 0.005) found.
func TestCheckpointAfterSyncErrorSurvivesPowerLoss(t *testing.T) {
	ctx := context.Background()
	const keys = 40
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
			for i := range keys { // NORMAL commits over many pages, with the index on expires_at
				require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300), state.TTL(time.Hour)))
			}
			m.FailAt(faults.OpSync, 1)
			_, err = db.Lease(ctx, "job", "a", time.Minute)
			require.ErrorIs(t, err, state.ErrIO)
			m.Crash(1)
			_ = db.Close()

			m.PowerLossAt(at, mode)
			restarted, err := open(2)
			if err == nil {
				_ = restarted.Close()
			}
			cut := !m.Powered()
			if !cut {
				break // the restart made fewer disk calls than at: every one was cut
			}
			cuts++
			m.Reboot()
			after, err := open(3)
			require.NoError(t, err, "%s cut at call %d", mode, at)
			findings, err := after.Check(ctx)
			require.NoError(t, err)
			require.Empty(t, findings, "%s cut at call %d of the restart", mode, at)
			requirePrefix(t, after, keys, fmt.Sprintf("%s cut at call %d", mode, at))
			require.NoError(t, after.Close())
		}
	}
	assert.Greater(t, cuts, 10, "the cuts fell inside the restart's repair and checkpoint")
}

// TestFailedHandleCloseSurvivesPowerLoss: as above, but the handle whose
// WAL sync failed is the file's last connection and closes: SQLite's last
// connection checkpoints at close, and the one that saw the sync fail is
// never told again. The power is cut at each disk call of that Close.
func TestFailedHandleCloseSurvivesPowerLoss(t *testing.T) {
	ctx := context.Background()
	const keys = 40
	cuts := 0
	for _, mode := range []faults.LossMode{faults.LossKeep, faults.LossTear} {
		for at := int64(1); ; at++ {
			m := faults.NewMemFS(uint64(at))
			clock := newClock()
			open := func(pid int) (*state.DB, error) {
				return state.Open("/sim/close.state", state.WithFS(m.Process(pid)), state.WithClock(clock), state.WithoutBackground())
			}
			db, err := open(1)
			require.NoError(t, err)
			for i := range keys {
				require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300), state.TTL(time.Hour)))
			}
			m.FailAt(faults.OpSync, 1)
			_, err = db.Lease(ctx, "job", "a", time.Minute)
			require.ErrorIs(t, err, state.ErrIO)

			m.PowerLossAt(at, mode)
			_ = db.Close()
			if m.Powered() {
				break // Close made fewer disk calls than at
			}
			cuts++
			m.Reboot()
			after, err := open(2)
			require.NoError(t, err, "%s cut at call %d", mode, at)
			findings, err := after.Check(ctx)
			require.NoError(t, err)
			require.Empty(t, findings, "%s cut at call %d of the failed handle's Close", mode, at)
			requirePrefix(t, after, keys, fmt.Sprintf("%s cut at call %d", mode, at))
			require.NoError(t, after.Close())
		}
	}
	assert.Greater(t, cuts, 2, "the cuts fell inside the failed handle's Close, its WAL repair included")
}

// requirePrefix requires keys k00.. to have survived as a prefix: once one
// is missing, every later one is too.
func requirePrefix(t *testing.T, db *state.DB, keys int, what string) {
	t.Helper()
	gone := -1
	for i := range keys {
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
