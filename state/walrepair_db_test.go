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

// TestPartialCheckpointThenFailedSyncKeepsAGrantBesideAReader is the same
// with a reader of another process (a backup tool, a sqlite3 shell left in
// a transaction) keeping an older snapshot while the next process opens:
// no checkpoint can copy the whole WAL then, so Open rewrites the pages of
// the frames up to the backfill mark under the checkpointer's lock, without
// waiting for the reader. After the reader, a checkpoint copies the rest
// and syncs "successfully", the WAL starts over, and the power goes: the
// grant must still be there. Before, Open waited its busy timeout for the
// reader and went on without the repair, and the grant was lost.
func TestPartialCheckpointThenFailedSyncKeepsAGrantBesideAReader(t *testing.T) {
	ctx := context.Background()
	const path = "/sim/partial.state"
	const budget = 2 * time.Second // how long Open waited for the reader before
	m := faults.NewMemFS(1)
	clock := newClock()
	open := func(pid int) *state.DB {
		db, err := state.Open(path, state.WithFS(m.Process(pid)), state.WithClock(clock), state.WithoutBackground(),
			state.WithBusyTimeout(budget))
		require.NoError(t, err)
		return db
	}
	conns := func(pid, n int) []*sql.Conn {
		name, unregister, err := vfs.Register(m.Process(pid))
		require.NoError(t, err)
		t.Cleanup(unregister)
		raw, err := sql.Open("sqlite", "file:"+path+"?vfs="+name)
		require.NoError(t, err)
		t.Cleanup(func() { raw.Close() })
		var cs []*sql.Conn
		for range n {
			c, err := raw.Conn(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			cs = append(cs, c)
		}
		return cs
	}
	read := func(c *sql.Conn) {
		_, err := c.ExecContext(ctx, `BEGIN`)
		require.NoError(t, err)
		var n int
		require.NoError(t, c.QueryRowContext(ctx, `SELECT count(*) FROM leases`).Scan(&n))
	}
	commit := func(c *sql.Conn) {
		_, err := c.ExecContext(ctx, `COMMIT`)
		require.NoError(t, err)
	}
	db1 := open(1)
	_, err := db1.Lease(ctx, "job", "a", time.Hour)
	require.NoError(t, err)

	cs := conns(1, 2)
	reader, ckpt := cs[0], cs[1]
	read(reader)
	require.NoError(t, db1.Set(ctx, "k", "v")) // frames past the reader's snapshot
	var busy, frames, copied int
	require.NoError(t, ckpt.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied))
	require.Positive(t, copied, "the checkpoint copies the frames up to the reader's snapshot")
	require.Less(t, copied, frames, "and stops there, without syncing the file")
	commit(reader)
	m.FailAt(faults.OpSync, 2)
	err = ckpt.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	require.Error(t, err, "the file's sync must fail")
	require.Equal(t, int64(1), m.Stats().InjectedSyncErrors)

	backup := conns(4, 1)[0] // another process's reader, on an older snapshot from here
	read(backup)
	require.NoError(t, db1.Set(ctx, "k", "w"))

	db2 := open(2) // a process that was not open when the sync failed
	commit(backup)
	require.NoError(t, ckpt.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied))
	require.Equal(t, frames, copied, "the rest is copied, and the file synced")
	require.NoError(t, db2.Set(ctx, "k", "x")) // the WAL starts over
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
