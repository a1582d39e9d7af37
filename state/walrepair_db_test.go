package state_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/require"
)

// TestPartialCheckpointThenFailedSyncKeepsAGrant is the database file's
// fsyncgate: a checkpoint that a reader's snapshot stops half-way writes
// pages of the file (here the lease table's, with a FULL grant) and counts
// them as copied without syncing; a sync of the file then fails, so they
// never reach the disk; a process that opens afterwards is not told, and
// its checkpoint at Open syncs "successfully" and empties the WAL those
// pages came from. A power loss then must not take the grant back: Open
// rewrites the pages the WAL names before it checkpoints.
func TestPartialCheckpointThenFailedSyncKeepsAGrant(t *testing.T) {
	ctx := context.Background()
	const path = "/sim/partial.state"
	m := faults.NewMemFS(1)
	clock := newClock()
	open := func(pid int) *state.DB {
		db, err := state.Open(path, state.WithFS(m.Process(pid)), state.WithClock(clock), state.WithoutBackground())
		require.NoError(t, err)
		return db
	}
	db1 := open(1)
	_, err := db1.Lease(ctx, "job", "a", time.Hour)
	require.NoError(t, err)

	// Another connection of process 1, through the same disk: a reader
	// that holds the snapshot with the grant, and a checkpointer.
	name, unregister, err := vfs.Register(m.Process(1))
	require.NoError(t, err)
	defer unregister()
	raw, err := sql.Open("sqlite", "file:"+path+"?vfs="+name)
	require.NoError(t, err)
	defer raw.Close()
	reader, err := raw.Conn(ctx)
	require.NoError(t, err)
	ckpt, err := raw.Conn(ctx)
	require.NoError(t, err)
	_, err = reader.ExecContext(ctx, `BEGIN`)
	require.NoError(t, err)
	var n int
	require.NoError(t, reader.QueryRowContext(ctx, `SELECT count(*) FROM leases`).Scan(&n))
	require.NoError(t, db1.Set(ctx, "k", "v")) // frames past the reader's snapshot

	var busy, frames, copied int
	require.NoError(t, ckpt.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied))
	require.Positive(t, copied, "the checkpoint copies the frames up to the reader's snapshot")
	require.Less(t, copied, frames, "and stops there, without syncing the file")
	_, err = reader.ExecContext(ctx, `COMMIT`)
	require.NoError(t, err)

	// The rest of the checkpoint syncs the WAL, then the file: that fails.
	m.FailAt(faults.OpSync, 2)
	err = ckpt.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	require.Error(t, err, "the file's sync must fail")
	require.Equal(t, int64(1), m.Stats().InjectedSyncErrors)

	db2 := open(2) // a process that was not open when the sync failed
	require.NoError(t, db2.Close())
	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	_ = db1.Close()

	db3 := open(3)
	defer db3.Close()
	_, err = db3.Lease(ctx, "job", "b", time.Minute)
	var held *state.LeaseHeldError
	require.True(t, errors.As(err, &held), "the grant to a (FULL, acknowledged) was lost: %v", err)
	require.Equal(t, "a", held.Owner)
	findings, err := db3.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, findings)
}
