package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
)

// TestSurvivorWritesItsMarkAgainAfterAnotherHandlesLoss: on a file system
// that drops a failed sync's writes, another handle's failed sync takes
// back this handle's latest high-water mark row, though this handle lives
// on and goes on using the times the row covered. It must write its mark
// again before it uses one of them, so that an Open after it, with the wall
// clock stepped back, starts at or after every time it used. Without the
// look at the shared index (state/indexwatch.go) the Open starts behind.
func TestSurvivorWritesItsMarkAgainAfterAnotherHandlesLoss(t *testing.T) {
	ctx := context.Background()
	m := faults.NewMemFS(1)
	m.SetDropFailedSyncs(true)
	clock := newClock()
	open := func(pid int) *state.DB {
		db, err := state.Open("/sim/mark.state", state.WithFS(m.Process(pid)), state.WithClock(clock), state.WithoutBackground())
		require.NoError(t, err)
		return db
	}
	failing, survivor := open(1), open(2)
	_, err := failing.Lease(ctx, "durable", "a", time.Minute) // a FULL commit: everything before it is durable
	require.NoError(t, err)

	clock.Advance(2 * state.HighWaterLead)
	_, err = survivor.Get(ctx, "k") // its mark moves a lead ahead: a NORMAL commit, not yet durable
	require.ErrorIs(t, err, state.ErrNotFound)

	m.FailAt(faults.OpSync, 1)
	_, err = failing.Lease(ctx, "job", "a", time.Minute)
	require.ErrorIs(t, err, state.ErrIO, "the failed sync dropped what was not durable, the survivor's mark too")

	clock.Advance(state.HighWaterLead / 2) // within the mark the survivor wrote, and lost
	used := survivor.Now()
	_, err = survivor.Get(ctx, "k")
	require.ErrorIs(t, err, state.ErrNotFound)

	clock.StepWall(-time.Hour)
	later := open(3)
	require.False(t, later.Now().Before(used),
		"an Open after the loss started at %v, behind %v, a time the survivor used after it", later.Now(), used)
	require.NoError(t, later.Close())
	require.NoError(t, survivor.Close())
	_ = failing.Close()
}
