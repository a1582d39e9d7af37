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

// readCommands are the read commands with arguments, for a file holding
// the key "k".
var readCommands = [][]string{
	{"get", "k"}, {"ttl", "k"}, {"dump"}, {"dump", "--json"}, {"leases", "--all"}, {"info"}, {"check"},
}

// TestReadsCreateNothingBeside: the owner of a closed state file makes it
// read-only (0400) and reads it with every read command. None creates a
// -wal or -shm beside it (which would get the file's mode, 0400), so once
// the owner makes it writable again, writes work.
func TestReadsCreateNothingBeside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Set(context.Background(), "k", "hello"))
	require.NoError(t, db.Close())
	require.NoError(t, os.Chmod(path, 0o400))
	statectl := statectlCopy(t)
	tmp := t.TempDir()

	for _, args := range readCommands {
		_, errOut, code := runStatectl(t, statectl, tmp, -1, append([]string{args[0], path}, args[1:]...)...)
		assert.Equal(t, 0, code, "%s: %s", args, errOut)
		assertNothingBeside(t, path, args)
	}

	require.NoError(t, os.Chmod(path, 0o600))
	_, errOut, code := runStatectl(t, statectl, tmp, -1, "set", path, "k", "again")
	assert.Equal(t, 0, code, "the owner writes after the reads: %s", errOut)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "every private copy is removed")
}

// TestReadsByAnotherUserCreateNothingBeside: a state file belongs to its
// application's user (nobody here), in a directory everyone may write; a
// reader of another user runs every read command on it. None creates a
// -wal or -shm beside it, which would belong to the reader and stop the
// application from writing its own file. Needs root, to act as two users.
func TestReadsByAnotherUserCreateNothingBeside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the reader and the application as two other users")
	}
	const appUID, readerUID = 65534, 65533
	base := publicTempDir(t)
	data, tmp := filepath.Join(base, "data"), filepath.Join(base, "tmp")
	for _, d := range []string{data, tmp} {
		require.NoError(t, os.Mkdir(d, 0o755))
		require.NoError(t, os.Chmod(d, 0o1777))
	}
	path := filepath.Join(data, "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Set(context.Background(), "k", "hello"))
	require.NoError(t, db.Close())
	require.NoError(t, os.Chown(path, appUID, appUID))
	require.NoError(t, os.Chmod(path, 0o644))
	statectl := statectlCopy(t)

	for _, args := range readCommands {
		_, errOut, code := runStatectl(t, statectl, tmp, readerUID, append([]string{args[0], path}, args[1:]...)...)
		assert.Equal(t, 0, code, "%s: %s", args, errOut)
		assertNothingBeside(t, path, args)
	}
	_, errOut, code := runStatectl(t, statectl, tmp, appUID, "set", path, "k", "again")
	assert.Equal(t, 0, code, "the application writes after the reads: %s", errOut)
}

// assertNothingBeside checks that path has no -wal or -shm file.
func assertNothingBeside(t *testing.T, path string, args []string) {
	t.Helper()
	for _, suffix := range []string{"-wal", "-shm"} {
		_, err := os.Lstat(path + suffix)
		assert.ErrorIs(t, err, os.ErrNotExist, "%s left %s%s", args, filepath.Base(path), suffix)
	}
}
