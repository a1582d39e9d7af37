package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadsOfACrashedWritersFileCreateNothingBeside: a writer crashed, so
// its state file has a -wal holding its last commit and no -shm, and no
// process has it open. A reader of another user runs every read command on
// it: each sees the commit in the -wal, and none creates a -shm beside the
// file (it would belong to the reader and stop the application from
// opening its own file) or changes the -wal. As root the file belongs to
// nobody and the reader is another user; otherwise both are this user.
func TestReadsOfACrashedWritersFileCreateNothingBeside(t *testing.T) {
	appUID, readerUID := -1, -1
	if os.Geteuid() == 0 {
		appUID, readerUID = 65534, 65533
	}
	base := publicTempDir(t)
	data, tmp := filepath.Join(base, "data"), filepath.Join(base, "tmp")
	for _, d := range []string{data, tmp} {
		require.NoError(t, os.Mkdir(d, 0o755))
		require.NoError(t, os.Chmod(d, 0o1777))
	}
	path := filepath.Join(data, "app.state")
	writeCrashed(t, path)
	if appUID >= 0 {
		for _, p := range []string{path, path + "-wal"} {
			require.NoError(t, os.Chown(p, appUID, appUID))
		}
	}
	wal, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	statectl := statectlCopy(t)

	for _, args := range readCommands {
		out, errOut, code := runStatectl(t, statectl, tmp, readerUID, append([]string{args[0], path}, args[1:]...)...)
		assert.Equal(t, 0, code, "%s: %s", args, errOut)
		if args[0] == "get" {
			assert.Equal(t, "hello\n", out, "the commit in the -wal is read")
		}
		_, err := os.Lstat(path + "-shm")
		assert.ErrorIs(t, err, os.ErrNotExist, "%s left app.state-shm", args)
		after, err := os.ReadFile(path + "-wal")
		require.NoError(t, err)
		assert.Equal(t, wal, after, "%s changed the -wal", args)
	}
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "every private copy is removed")

	_, errOut, code := runStatectl(t, statectl, tmp, appUID, "set", path, "k", "again")
	assert.Equal(t, 0, code, "the application writes after the reads: %s", errOut)
	out, errOut, code := runStatectl(t, statectl, tmp, appUID, "get", path, "k")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "again\n", out)
}

// writeCrashed leaves at path a state file as a writer that crashed leaves
// it: the key "k" committed to its -wal only, and no -shm.
func writeCrashed(t *testing.T, path string) {
	t.Helper()
	scratch := filepath.Join(t.TempDir(), "w.state")
	db, err := state.Open(scratch, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Set(context.Background(), "k", "hello"))
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(scratch + suffix)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path+suffix, b, 0o644))
	}
	require.NoError(t, db.Close())
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	require.NotZero(t, fi.Size(), "the commit is in the -wal")
}
