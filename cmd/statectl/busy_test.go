package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWritesSayTheFileIsBusy: another process holds the file's write lock
// past the busy timeout. A write command fails with status 2 saying the
// file is busy, in the words run uses, not SQLite's "database is locked
// (5) (SQLITE_BUSY)"; once the lock is let go it works.
func TestWritesSayTheFileIsBusy(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Close())
	statectl := statectlCopy(t)

	raw, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer raw.Close()
	conn, err := raw.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(t, err)

	_, errOut, code := runStatectl(t, statectl, t.TempDir(), -1, "set", path, "k", "v")
	assert.Equal(t, 2, code, errOut)
	assert.Equal(t, "statectl: "+path+": the file is busy (another process holds its write lock)\n", errOut)

	_, err = conn.ExecContext(ctx, `COMMIT`)
	require.NoError(t, err)
	_, errOut, code = runStatectl(t, statectl, t.TempDir(), -1, "set", path, "k", "v")
	assert.Equal(t, 0, code, errOut)
}
