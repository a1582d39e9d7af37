package state

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHoleAtOpenDecides: what Open does with an error that says the file is
// damaged, by what is beside the file: with no WAL, the error as it is;
// with a WAL that lost frames the index another handle holds counts, the
// hole's ErrIO; with a WAL and no hole in what an index counts (here the
// failed handle closed and let go of the index; or it marked the index for
// rebuilding), the error as it is and one more Open, which rebuilds the
// index and stops at the break. An error of another kind is left alone.
func TestHoleAtOpenDecides(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	m.SetDropFailedSyncs(true)
	clock := faults.NewClock(time.UnixMilli(1_700_000_000_000))
	const path = "/sim/decide.state"
	open := func(pid int) *DB {
		// The failed handle leaves the index as it was (keepIndex): the
		// hole nobody marked for rebuilding.
		db, err := Open(path, WithFS(m.Process(pid)), WithClock(clock), WithoutBackground(),
			func(cfg *config) { cfg.keepIndex = true })
		require.NoError(t, err)
		return db
	}
	damaged := fmt.Errorf("open %s: %w: database disk image is malformed", path, ErrCorrupt)
	fsys := m.Process(9)

	db := open(1)
	for i := range 40 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
	}
	require.NoError(t, db.Close()) // a clean Close deletes the WAL
	again, err := holeAtOpen(fsys, path, damaged)
	assert.False(t, again, "no WAL: no hole to meet")
	assert.Equal(t, damaged, err)

	db = open(1)
	_, err = db.Lease(ctx, "durable", "a", time.Minute)
	require.NoError(t, err)
	for i := 40; i < 80; i++ {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("w", 300)))
	}
	m.FailAt(faults.OpSync, 1)
	_, err = db.Lease(ctx, "job", "a", time.Minute)
	require.ErrorIs(t, err, ErrIO)
	again, err = holeAtOpen(fsys, path, damaged)
	assert.False(t, again)
	require.ErrorIs(t, err, ErrIO, "the failed handle holds the index: the hole is found")
	assert.NotErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "lost frames its index counts as committed")

	busy := fmt.Errorf("open %s: %w", path, ErrBusy)
	again, err = holeAtOpen(fsys, path, busy)
	assert.False(t, again)
	assert.Equal(t, busy, err, "not damage: left alone")

	_ = db.Close() // keeps the WAL, and lets go of the index
	again, err = holeAtOpen(fsys, path, damaged)
	assert.True(t, again, "a WAL and no hole an index counts: one more Open")
	assert.Equal(t, damaged, err)
	after := open(2)
	defer after.Close()
	_, err = after.Get(ctx, "k79")
	require.ErrorIs(t, err, ErrNotFound, "that Open stopped at the break")
	v, err := after.Get(ctx, "k00")
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("v", 300), v.String())
}
