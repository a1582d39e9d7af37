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

// writeCommands are the write commands with arguments, for a file holding
// the key "k".
var writeCommands = [][]string{
	{"set", "k", "v"}, {"del", "k"}, {"incr", "n"}, {"decr", "n"}, {"expire", "k", "--ttl", "1m"},
	{"cas", "k", "hello", "v"}, {"sweep"}, {"run", "--lease", "job", "--", "true"},
}

// TestWritesItCannotMakeCreateNothingBeside: a state file belongs to its
// application's user (nobody here), in a directory everyone may write; a
// user who may read it but not write it runs every write command on it.
// Each fails saying permission is denied, and none creates a -wal or -shm
// beside it: SQLite would open the file read-only and create them, owned
// by that user, and the application could then no longer open its own
// file ("attempt to write a readonly database"). Needs root, to act as two
// users.
func TestWritesItCannotMakeCreateNothingBeside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the writer and the application as two other users")
	}
	const appUID, otherUID = 65534, 65533
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

	for _, args := range writeCommands {
		_, errOut, code := runStatectl(t, statectl, tmp, otherUID, append([]string{args[0], path}, args[1:]...)...)
		assert.Equal(t, 2, code, "%s: %s", args, errOut)
		assert.Contains(t, errOut, path+": permission denied", "%s", args)
		assertNothingBeside(t, path, args)
	}
	_, errOut, code := runStatectl(t, statectl, tmp, appUID, "set", path, "k", "again")
	assert.Equal(t, 0, code, "the application writes after the others' writes: %s", errOut)
}

// TestWritesInADirectoryItCannotWriteSayWhy: the user may write the state
// file but not its directory, where SQLite must create the -wal and -shm
// files it writes a WAL file with. A write command fails saying so, not
// just "permission denied" of a file the user may write, and creates
// nothing. As root the writer runs as nobody; otherwise the directory is
// made read-only.
func TestWritesInADirectoryItCannotWriteSayWhy(t *testing.T) {
	uid := -1
	if os.Geteuid() == 0 {
		uid = 65534
	}
	base := publicTempDir(t)
	data := filepath.Join(base, "data")
	require.NoError(t, os.Mkdir(data, 0o755))
	t.Cleanup(func() { os.Chmod(data, 0o755) })
	path := filepath.Join(data, "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Set(context.Background(), "k", "hello"))
	require.NoError(t, db.Close())
	if uid >= 0 {
		require.NoError(t, os.Chown(path, uid, uid))
	} else {
		require.NoError(t, os.Chmod(data, 0o555))
	}
	statectl := statectlCopy(t)

	_, errOut, code := runStatectl(t, statectl, t.TempDir(), uid, "set", path, "k", "v")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "cannot create the -wal and -shm files")
	assert.Contains(t, errOut, "access "+data+": permission denied")
	assertNothingBeside(t, path, []string{"set"})
}

// TestCreateInADirectoryItCannotWriteSaysWhy: the file is missing and the
// user may not create files in its directory. Every write command fails
// saying it cannot create the file there, not a bare "permission denied"
// of a file that does not exist, and creates nothing. As root the writer
// runs as nobody; otherwise the directory is made read-only.
func TestCreateInADirectoryItCannotWriteSaysWhy(t *testing.T) {
	uid := -1
	if os.Geteuid() == 0 {
		uid = 65534
	}
	base := publicTempDir(t)
	data := filepath.Join(base, "data")
	require.NoError(t, os.Mkdir(data, 0o755))
	if uid < 0 {
		require.NoError(t, os.Chmod(data, 0o555))
		t.Cleanup(func() { os.Chmod(data, 0o755) })
	}
	path := filepath.Join(data, "app.state")
	statectl := statectlCopy(t)

	for _, args := range writeCommands {
		_, errOut, code := runStatectl(t, statectl, t.TempDir(), uid, append([]string{args[0], path}, args[1:]...)...)
		assert.Equal(t, 2, code, "%s: %s", args, errOut)
		assert.Equal(t, "statectl: "+path+": cannot create it in "+data+": permission denied\n", errOut, "%s", args)
		_, err := os.Lstat(path)
		assert.ErrorIs(t, err, os.ErrNotExist, "%s created the file", args)
		assertNothingBeside(t, path, args)
	}
}
