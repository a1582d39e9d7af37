package state

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state/vfs"
)

// TestFailedCheckpointSyncSendsReadersToTheWAL is the database file's
// fsyncgate seen by a process that stays open: the background
// checkpointer's first pass, stopped short by another process's reader,
// copies the lease table's page (with a FULL grant) into the file and moves
// the backfill mark past it; the sync of the file after it fails, and the
// kernel reclaims that page, so the file reads back as the disk has it,
// without the grant. A process open all along then asks for the lease: it
// must find it held. Before the checkpointer moved the mark back, that
// process took the page from the file, as the mark said, and granted the
// lease again (statesim -seed 10040140 -evictfailedsyncs -syncerror 0.03:
// a fencing token handed out twice).
//
// The kernel may reclaim a page at any disk call after the failure; each
// seed of the file system draws those moments anew. The mark goes back
// before the checkpointer reads anything, so on every seed the index is
// left as it is (no rebuild) and the grant is read from the WAL.
func TestFailedCheckpointSyncSendsReadersToTheWAL(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		require.True(t, readAfterFailedCheckpointSync(t, seed), "seed %d: the index was marked for rebuilding", seed)
	}
}

// readAfterFailedCheckpointSync runs the test's story on a file system of
// the seed given, and reports whether the index was left unmarked.
func readAfterFailedCheckpointSync(t *testing.T, seed uint64) (unmarked bool) {
	ctx := t.Context()
	const path = "/sim/rewind.state"
	m := faults.NewMemFS(seed)
	m.SetEvictFailedSyncs(true)
	clock := faults.NewClock(time.UnixMilli(1_700_000_000_000))
	open := func(pid int) *DB {
		db, err := Open(path, WithFS(m.Process(pid)), WithClock(clock), WithSweepInterval(0),
			WithBusyTimeout(2*time.Second), hooks.Option(hooks.Engine{CheckpointEvery: 1 << 30}).(Option))
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	db1 := open(1)
	peer := open(2) // open all along: no Open's repair runs for it
	_, err := db1.Lease(ctx, "job", "a", time.Hour)
	require.NoError(t, err)

	name, unregister, err := vfs.Register(m.Process(3))
	require.NoError(t, err)
	t.Cleanup(unregister)
	raw, err := sql.Open("sqlite", "file:"+path+"?vfs="+name)
	require.NoError(t, err)
	t.Cleanup(func() { raw.Close() })
	reader, err := raw.Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { reader.Close() })
	_, err = reader.ExecContext(ctx, `BEGIN`)
	require.NoError(t, err)
	var n int
	require.NoError(t, reader.QueryRowContext(ctx, `SELECT count(*) FROM leases`).Scan(&n))
	require.NoError(t, db1.Set(ctx, "k", "v")) // frames past the reader's snapshot

	// The pass syncs the WAL before it copies (1), then the checkpointer
	// syncs the file (2).
	m.FailAt(faults.OpSync, 2)
	db1.bg.ckpt.checkpoint(db1)
	require.Equal(t, int64(1), m.Stats().InjectedSyncErrors)
	failed := db1.ckptFailed.Load()
	require.NotNil(t, failed, "the checkpointer's sync of the file must fail")
	require.ErrorIs(t, *failed, ErrIO)
	require.Contains(t, (*failed).Error(), "checkpoint: sync")
	unmarked = !indexMarked(peer.conn)
	m.EvictFailedPages()
	require.Positive(t, m.Stats().EvictedPages, "the kernel reclaims the file's failed pages")
	_, err = reader.ExecContext(ctx, `COMMIT`)
	require.NoError(t, err)

	_, err = peer.Lease(ctx, "job", "b", time.Minute)
	var held *LeaseHeldError
	require.True(t, errors.As(err, &held), "seed %d: the grant to a (FULL, acknowledged) was read back lost: %v", seed, err)
	require.Equal(t, "a", held.Owner)
	got, err := peer.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v", got.String())
	findings, err := peer.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, findings)
	return unmarked
}
