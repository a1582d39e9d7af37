package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBackgroundCheckpointNoticesATruncatedWAL: another program truncates
// the -wal file while a handle has it open, and the first of the engine's
// looks to come is a background checkpoint (the clock stands still, so no
// mark write is due). The checkpoint ends the handle with ErrCorrupt and
// copies nothing into the database file, which, reopened, is sound and
// holds what was checkpointed before. Without the look, it copied the
// truncated WAL into the file.
func TestBackgroundCheckpointNoticesATruncatedWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wal.state")
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() *DB {
		db, err := Open(path, WithClock(clock))
		require.NoError(t, err)
		return db
	}
	ctx := context.Background()
	db := open()
	for i := range 20 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("old%d", i), i))
	}
	require.NoError(t, db.Close()) // checkpointed into the file
	db = open()
	for i := range 20 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("new%d", i), i))
	}
	require.NotNil(t, db.bg.ckpt.conn, "the handle runs the background checkpointer")

	require.NoError(t, os.Truncate(path+"-wal", 0)) // another program
	db.bg.ckpt.checkpoint(db)                       // as the background goroutine runs it
	_, err := db.Get(ctx, "old0")
	require.ErrorIs(t, err, ErrCorrupt, "the checkpoint ended the handle")
	assert.ErrorContains(t, err, "shorter than the")
	require.ErrorIs(t, db.Close(), ErrCorrupt)

	db = open()
	defer db.Close()
	findings, err := db.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, findings, "the file is sound")
	for i := range 20 {
		v, err := db.Get(ctx, fmt.Sprintf("old%d", i))
		require.NoError(t, err, "old%d", i)
		assert.Equal(t, fmt.Sprint(i), v.String())
	}
}
