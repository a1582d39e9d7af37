package state_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/require"
)

// TestFailedHandleCloseMakesTheWALDurable: as in cutAfterSyncError, a FULL
// grant's WAL sync fails after syncErrorKeys NORMAL commits, whose frames
// stay readable but never reach the disk (fsyncgate); the failed handle's
// Close rewrites the WAL in place and syncs it (mendWAL, walrepair.go), so
// that the connections that close after it, which never hear of the
// failure again, leave a WAL that is durable as they read it. Then the
// power goes, dropping every unsynced write: the file must open sound with
// every key set before the failure. TestCheckpointAfterSyncErrorSurvivesPowerLoss
// and TestFailedHandleCloseSurvivesPowerLoss pass with mendWAL doing
// nothing (they check only for a prefix, which an empty one is); this
// fails then: after the power loss k00 is missing, the frames that held it
// never made durable.
func TestFailedHandleCloseMakesTheWALDurable(t *testing.T) {
	ctx := context.Background()
	m := faults.NewMemFS(1)
	clock := newClock()
	open := func(pid int) (*state.DB, error) {
		return state.Open("/sim/mend.state", state.WithFS(m.Process(pid)), state.WithClock(clock), state.WithoutBackground())
	}
	db, err := open(1)
	require.NoError(t, err)
	for i := range syncErrorKeys {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300), state.TTL(time.Hour)))
	}
	m.FailAt(faults.OpSync, 1)
	_, err = db.Lease(ctx, "job", "a", time.Minute)
	require.ErrorIs(t, err, state.ErrIO)
	before := m.Stats().Syncs
	_ = db.Close()
	require.Greater(t, m.Stats().Syncs, before, "the failed handle's Close synced")

	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	after, err := open(9)
	require.NoError(t, err)
	defer after.Close()
	findings, err := after.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, findings)
	requirePrefix(t, after, "after the power loss")
	for i := range syncErrorKeys {
		_, err := after.Get(ctx, fmt.Sprintf("k%02d", i))
		require.NoError(t, err, "k%02d, set before the failed sync, made durable by Close's repair", i)
	}
}
