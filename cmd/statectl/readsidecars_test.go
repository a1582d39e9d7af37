package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// TestReadsOfALiveFileByAnotherUser: an application (here root) has its
// state file open, with its latest commits in the -wal; another user, who
// may read the file and its -wal and -shm but write neither them nor the
// directory, runs every read command. Each reads in place, the writer's
// latest commit included, creates nothing beside the file and leaves no
// copy; the application writes on after. Needs root, to act as another
// user.
func TestReadsOfALiveFileByAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the reader as another user")
	}
	const readerUID = 65533
	base := publicTempDir(t)
	data, tmp := filepath.Join(base, "data"), filepath.Join(base, "tmp")
	require.NoError(t, os.Mkdir(data, 0o755))
	require.NoError(t, os.Mkdir(tmp, 0o755))
	require.NoError(t, os.Chmod(tmp, 0o1777))
	path := filepath.Join(data, "app.state")
	ctx := context.Background()
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.NoError(t, os.Chmod(path, 0o644)) // its -wal and -shm get its mode
	db, err = state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set(ctx, "k", "latest"))
	_, err = db.Lease(ctx, "job", "app", time.Hour)
	require.NoError(t, err)
	before, err := os.ReadDir(data)
	require.NoError(t, err)
	require.Len(t, before, 3, "the file, its -wal and its -shm")
	statectl := statectlCopy(t)

	for _, args := range readCommands {
		out, errOut, code := runStatectl(t, statectl, tmp, readerUID, append([]string{args[0], path}, args[1:]...)...)
		assert.Equal(t, 0, code, "%s: %s", args, errOut)
		switch args[0] {
		case "get":
			assert.Equal(t, "latest\n", out, "the writer's latest commit")
		case "leases":
			assert.Contains(t, out, "job\tapp\t1\theld\t")
		}
		after, err := os.ReadDir(data)
		require.NoError(t, err)
		assert.Equal(t, before, after, "%s: nothing created beside the file", args)
		copies, err := os.ReadDir(tmp)
		require.NoError(t, err)
		assert.Empty(t, copies, "%s: no copy left", args)
	}
	require.NoError(t, db.Set(ctx, "k", "after"), "the application writes on")
}

// assertNothingBeside checks that path has no -wal or -shm file.
func assertNothingBeside(t *testing.T, path string, args []string) {
	t.Helper()
	for _, suffix := range []string{"-wal", "-shm"} {
		_, err := os.Lstat(path + suffix)
		assert.ErrorIs(t, err, os.ErrNotExist, "%s left %s%s", args, filepath.Base(path), suffix)
	}
}
