package state

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
)

// markThrough marks the shared index for rebuilding through db's idle
// connection, as a handle whose sync lost writes does (forgetIndex's first
// mark, without a lock).
func markThrough(t *testing.T, db *DB) {
	t.Helper()
	marked := false
	require.NoError(t, db.conn.Raw(func(dc any) error {
		if v, region := indexRegion(dc); v != nil {
			markUninitialised(region)
			v.close()
			marked = true
		}
		return nil
	}))
	require.True(t, marked, "the connection has the index mapped")
}

// TestCommitBesideTheMarkIsRefused: a transaction that began before
// another handle marked the shared index for rebuilding (its failed sync
// took writes back, so what the transaction read may be gone) must not
// commit: its commit is turned into a rollback, the verb fails with ErrIO
// saying why, and nothing of it is in the file. A transaction that begins
// after the mark rebuilds the index first and commits.
func TestCommitBesideTheMarkIsRefused(t *testing.T) {
	ctx := context.Background()
	m := faults.NewMemFS(1)
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(pid int) *DB {
		db, err := Open("/sim/guard.state", WithFS(m.Process(pid)), WithClock(clock), WithoutBackground())
		require.NoError(t, err)
		return db
	}
	marker, writer := open(1), open(2)
	defer marker.Close()
	require.NoError(t, marker.Set(ctx, "k", "before"))

	err := writer.Update(ctx, func(tx *Tx) error {
		if err := tx.Set("k", "inside"); err != nil {
			return err
		}
		markThrough(t, marker) // while the transaction runs
		return nil
	})
	require.ErrorIs(t, err, ErrIO)
	assert.Contains(t, err.Error(), "a commit was refused and nothing was written")
	_, err = writer.Get(ctx, "k")
	require.ErrorIs(t, err, ErrIO, "the handle has ended")
	_ = writer.Close()

	v, err := marker.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "before", v.String(), "the refused commit left nothing")

	markThrough(t, marker) // before the next transaction begins
	after := open(3)
	defer after.Close()
	markThrough(t, marker)
	require.NoError(t, after.Set(ctx, "k", "after"), "a transaction that begins after the mark rebuilds the index and commits")
	v, err = marker.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "after", v.String())
}
