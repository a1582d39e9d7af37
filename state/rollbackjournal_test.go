package state_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/statekit/statekit/internal/journaltest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadOnlyOpenRefusesAWriteCutShort(t *testing.T) {
	const n = 200
	cut := journaltest.CutWrite(t, t.TempDir(), n)
	before, err := os.ReadFile(cut)
	require.NoError(t, err)
	journal, err := os.ReadFile(cut + "-journal")
	require.NoError(t, err)

	db, err := state.Open(cut, state.WithReadOnly())
	if db != nil {
		db.Close()
	}
	require.ErrorIs(t, err, state.ErrUnfinishedWrite)
	assert.False(t, errors.Is(err, state.ErrReadOnly), "the file may be written: %v", err)
	assert.Contains(t, err.Error(), cut+"-journal")
	assert.Contains(t, err.Error(), "an Open that may write does it")
	after, err := os.ReadFile(cut)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a refused read-only open changed the file")
	left, err := os.ReadFile(cut + "-journal")
	require.NoError(t, err)
	assert.Equal(t, journal, left, "a refused read-only open changed the journal")

	// A writable open puts the pages back: every row the cut write was
	// deleting is there, and the file reads read-only afterwards.
	db, err = state.Open(cut)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	db, err = state.Open(cut, state.WithReadOnly())
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	for i := range n {
		_, err := db.Get(ctx, journaltest.Key(i))
		require.NoError(t, err, "k%d", i)
	}
	problems, err := db.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// The test's cut is a real one: without its journal, the file holds the
// half-done deletion, so a reader that ignored the journal would read it.
func TestCutRollbackWriteChangedTheFile(t *testing.T) {
	const n = 200
	cut := journaltest.CutWrite(t, t.TempDir(), n)
	require.NoError(t, os.Remove(cut+"-journal"))
	db, err := state.Open(cut, state.WithReadOnly())
	if err != nil {
		return // damage SQLite noticed: the file alone is not the old state
	}
	defer db.Close()
	ctx := context.Background()
	missing := 0
	for i := range n {
		if _, err := db.Get(ctx, journaltest.Key(i)); err != nil {
			missing++
		}
	}
	problems, err := db.Check(ctx)
	assert.True(t, missing > 0 || err != nil || len(problems) > 0, "the file alone still holds every row: the test cut nothing")
}

// TestOpenSwitchesAFileBackToWAL: another program switched a statekit file
// to a rollback journal (the sqlite3 shell's PRAGMA journal_mode=DELETE).
// Open, with or without background work, and read-only, reads every row;
// a writable Open switches the file back to WAL mode and writes.
func TestOpenSwitchesAFileBackToWAL(t *testing.T) {
	ctx := context.Background()
	for _, opts := range [][]state.Option{nil, {state.WithoutBackground()}, {state.WithSync(state.SyncFull)}} {
		path := filepath.Join(t.TempDir(), "app.state")
		db, err := state.Open(path)
		require.NoError(t, err)
		require.NoError(t, db.Set(ctx, "k", "v"))
		require.NoError(t, db.Close())
		raw, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		var mode string
		require.NoError(t, raw.QueryRow("PRAGMA journal_mode=DELETE").Scan(&mode))
		require.NoError(t, raw.Close())
		require.Equal(t, "delete", mode)

		ro, err := state.Open(path, state.WithReadOnly())
		require.NoError(t, err)
		v, err := ro.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, "v", v.String())
		require.NoError(t, ro.Close())

		db, err = state.Open(path, opts...)
		require.NoError(t, err, "%d options", len(opts))
		v, err = db.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, "v", v.String())
		require.NoError(t, db.Set(ctx, "k2", "v2"))
		header := make([]byte, 20)
		f, err := os.Open(path)
		require.NoError(t, err)
		_, err = f.ReadAt(header, 0)
		require.NoError(t, f.Close())
		require.NoError(t, err)
		assert.Equal(t, []byte{2, 2}, header[18:20], "the header names WAL mode again")
		require.NoError(t, db.Close())
	}
}
