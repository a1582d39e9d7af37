package state

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/stretchr/testify/require"
)

// TestCheckpointersFailedSyncHoleNotCheckpointedAtClose: on a file system
// that drops a failed sync's writes, the background checkpointer's own
// sync of the WAL fails, so the frames of the NORMAL commits since the
// last sync read back as zeros, the file's first page and the meta table's
// among them. The handle fails; its Close must leave the WAL as it is. The
// guard's read, which keeps a failed handle's connections from closing
// last, fails on those zeros and holds no lock; the checkpointer's
// connection, which saw its sync fail and so syncs "successfully" from
// then on, closed last, copied the zeros into the file and deleted the
// WAL: the file was "malformed" for good (statesim -seed 9600008
// -dropfailedsyncs -syncerror 0.02). The next Open must find the last
// commit made durable, sound.
func TestCheckpointersFailedSyncHoleNotCheckpointedAtClose(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	m.SetDropFailedSyncs(true)
	clock := faults.NewClock(time.UnixMilli(1_700_000_000_000))
	const path, keys = "/sim/ckpt.state", 40
	db, err := Open(path, WithFS(m.Process(1)), WithClock(clock), WithoutBackground())
	require.NoError(t, err)
	for i := range keys {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
	}
	require.NoError(t, db.Close()) // the keys go into the file, and the WAL starts over

	// The checkpointer runs only when this test calls it: no write kicks it.
	db, err = Open(path, WithFS(m.Process(1)), WithClock(clock), WithSweepInterval(0),
		hooks.Option(hooks.Engine{CheckpointEvery: 1 << 30}).(Option))
	require.NoError(t, err)
	_, err = db.Lease(ctx, "durable", "a", time.Minute) // syncs the WAL
	require.NoError(t, err)
	for i := keys; i < 2*keys; i++ { // NORMAL commits: the file grows, so its first page is among them
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("w", 300)))
	}
	require.NotNil(t, db.bg.ckpt.conn, "the handle has a checkpointer's connection")
	syncs := m.Stats().Syncs
	m.FailAt(faults.OpSync, 1)
	db.bg.ckpt.checkpoint(db)
	require.Equal(t, syncs+1, m.Stats().Syncs, "the checkpointer synced the WAL once, and failed")
	db.lock()
	failed := db.failed
	db.unlock()
	require.ErrorIs(t, failed, ErrIO, "the checkpointer's failed sync ends the handle")
	_ = db.Close()

	after, err := Open(path, WithFS(m.Process(2)), WithClock(clock), WithoutBackground())
	require.NoError(t, err, "alone on the file, Open recovers from the WAL")
	defer after.Close()
	findings, err := after.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, findings)
	for i := range 2 * keys {
		v, err := after.Get(ctx, fmt.Sprintf("k%02d", i))
		if i >= keys {
			require.ErrorIs(t, err, ErrNotFound, "k%02d was in the frames the failed sync dropped", i)
			continue
		}
		require.NoError(t, err, "k%02d", i)
		require.Equal(t, strings.Repeat("v", 300), v.String(), "k%02d as last made durable", i)
	}
}
