package state

import (
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/stretchr/testify/require"
)

// TestVerbBesideTheCheckpointersFailedSyncEndsTheHandle: the background
// checkpointer's sync fails while a verb holds the handle's lock; the
// checkpointer waits for the lock to end the handle. A verb that takes the
// lock before it must already find the handle ended: on a file system that
// drops a failed sync's writes, it would read pages the sync took back and
// commit pages built on them (statesim -seed 9600008 -procs 1
// -dropfailedsyncs -syncerror 0.02: several verbs answered in that wait,
// on rows the failed sync had dropped).
func TestVerbBesideTheCheckpointersFailedSyncEndsTheHandle(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	m.SetDropFailedSyncs(true)
	clock := faults.NewClock(time.UnixMilli(1_700_000_000_000))
	db, err := Open("/sim/beside.state", WithFS(m.Process(1)), WithClock(clock), WithSweepInterval(0),
		hooks.Option(hooks.Engine{CheckpointEvery: 1 << 30}).(Option))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, db.Set(ctx, "k", 1))

	db.lock() // a verb holds the lock while the checkpointer's sync fails
	m.FailAt(faults.OpSync, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.bg.ckpt.checkpoint(db)
	}()
	for i := 0; db.ckptFailed.Load() == nil; i++ {
		require.Less(t, i, 10_000, "the checkpointer never failed")
		time.Sleep(time.Millisecond)
	}
	err = db.usable(writing) // the next verb to take the lock, before the checkpointer does
	db.unlock()
	<-done
	require.ErrorIs(t, err, ErrIO, "the handle ended before the checkpointer took the lock")
	require.Contains(t, err.Error(), "checkpoint")
	_, err = db.Get(ctx, "k")
	require.ErrorIs(t, err, ErrIO)
}
