package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunWaitsForABusyFile: another process holds the file's write lock
// for longer than run's busy timeout (a third of its ttl); run --wait
// waits for it, at the open and at the grant, instead of failing at once.
// Without --wait it fails with status 2, saying the file is busy.
func TestRunWaitsForABusyFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Close())
	statectl := statectlCopy(t)

	hold := func(d time.Duration) {
		raw, err := sql.Open("sqlite", "file:"+path)
		require.NoError(t, err)
		t.Cleanup(func() { raw.Close() })
		conn, err := raw.Conn(ctx)
		require.NoError(t, err)
		_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
		require.NoError(t, err)
		go func() {
			time.Sleep(d)
			_, _ = conn.ExecContext(ctx, `COMMIT`)
			conn.Close()
		}()
	}

	hold(time.Second)
	_, errOut, code := runStatectl(t, statectl, t.TempDir(), -1, "run", path, "--lease", "job", "--ttl", "300ms", "--", "true")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "busy")
	time.Sleep(1200 * time.Millisecond)

	hold(1500 * time.Millisecond)
	start := time.Now()
	out, errOut, code := runStatectl(t, statectl, t.TempDir(), -1, "run", path, "--lease", "job", "--ttl", "300ms", "--wait", "20s",
		"--", "sh", "-c", `echo "token=$STATEKIT_FENCING_TOKEN"`)
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "token=1\n", out)
	assert.Contains(t, errOut, "busy (another process holds its write lock); waiting up to 20s")
	assert.Greater(t, time.Since(start), time.Second, "run waited for the lock")
}
