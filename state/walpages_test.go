package state_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
)

// TestRepairTakesPagesFromTheWAL is the database file's fsyncgate with the
// kernel reclaiming the failed pages: a checkpoint that a reader's
// snapshot stopped half-way wrote the lease table's page (with a FULL
// grant) into the file, a sync of the file then failed, and the kernel
// reclaims that page before the next process opens, so the file reads
// back as the disk has it, without the grant. The next Open's repair must
// write the page from its frame in the WAL, not as the file reads back:
// the WAL then starts over, the power goes, and the grant must still be
// there. Before, the repair read the page back from the file and made the
// reclaimed one durable. With a reader of another process on an older
// snapshot while the repair runs ("beside a reader"), the repair is the
// one behind that snapshot, under the checkpointer's lock.
func TestRepairTakesPagesFromTheWAL(t *testing.T) {
	for _, beside := range []bool{false, true} {
		name := "after the reader"
		if beside {
			name = "beside a reader"
		}
		t.Run(name, func(t *testing.T) { repairAfterEviction(t, beside) })
	}
}

func repairAfterEviction(t *testing.T, beside bool) {
	ctx := context.Background()
	const path = "/sim/evicted.state"
	m := faults.NewMemFS(1)
	m.SetEvictFailedSyncs(true)
	clock := newClock()
	open := func(pid int) *state.DB {
		db, err := state.Open(path, state.WithFS(m.Process(pid)), state.WithClock(clock), state.WithoutBackground(),
			state.WithBusyTimeout(2*time.Second))
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
	m.EvictFailedPages()
	require.Positive(t, m.Stats().EvictedPages, "the kernel reclaims the file's failed pages")

	var backup *sql.Conn
	if beside {
		backup = conns(4, 1)[0] // another process's reader, on an older snapshot from here
		read(backup)
		require.NoError(t, db1.Set(ctx, "k", "w"))
	}
	db2 := open(2) // a process that was not open when the sync failed
	if beside {
		commit(backup)
		require.NoError(t, ckpt.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied))
		require.Equal(t, frames, copied, "the rest is copied, and the file synced")
	}
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
