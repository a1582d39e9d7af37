//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadsInADirectoryItCannotWrite: a state file closed by its writer
// sits in a directory the reader cannot write, so SQLite cannot create the
// -wal and -shm files it needs to read a WAL file in place. Every read
// command still answers, from a private copy, leaves the file as it was and
// removes the copy. As root the reader runs as nobody; otherwise the
// directory is made read-only.
func TestReadsInADirectoryItCannotWrite(t *testing.T) {
	base, err := os.MkdirTemp("", "statectl-rodir-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.Chmod(filepath.Join(base, "data"), 0o755); os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	data, tmp, bin := filepath.Join(base, "data"), filepath.Join(base, "tmp"), filepath.Join(base, "bin")
	for _, d := range []string{data, tmp, bin} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	require.NoError(t, os.Chmod(tmp, 0o1777))

	path := filepath.Join(data, "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Set(context.Background(), "k", "hello"))
	require.NoError(t, db.Close())
	require.NoError(t, os.Chmod(path, 0o644))
	_, err = os.Stat(path + "-wal")
	require.ErrorIs(t, err, os.ErrNotExist, "a clean close removes the WAL")
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	// The test binary runs statectl's main when called by that name
	// (TestMain); the copy sits where the reader can run it.
	self, err := os.Executable()
	require.NoError(t, err)
	statectl := filepath.Join(bin, "statectl")
	copyExecutable(t, self, statectl)

	uid := -1
	if os.Geteuid() == 0 {
		uid = 65534 // nobody, who may not write the directory
	}
	run := func(args ...string) (string, string, int) { return runStatectl(t, statectl, tmp, uid, args...) }
	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(data, 0o555))
	}

	out, errOut, code := run("get", path, "k")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "hello\n", out)
	out, errOut, code = run("dump", path)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "k\tbytes\t-\thello")
	for _, cmd := range []string{"info", "check", "leases"} {
		_, errOut, code = run(cmd, path)
		assert.Equal(t, 0, code, "%s: %s", cmd, errOut)
	}
	_, errOut, code = run("get", path, "nope")
	assert.Equal(t, 1, code, errOut)

	// The reader could not write the directory: the check means something.
	_, errOut, code = run("set", path, "k", "v")
	assert.Equal(t, 2, code, "a write must fail in a directory the reader cannot write: %s", errOut)

	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the file is untouched")
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "every private copy is removed")
	names, err := os.ReadDir(data)
	require.NoError(t, err)
	assert.Len(t, names, 1, "nothing was created beside the file")
}

// TestCheckFindsATruncatedWAL: statectl check, beside a process that has
// the file open, reports a -wal file another program truncated (exit 1,
// the finding on stdout) although the database file itself is sound.
func TestCheckFindsATruncatedWAL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	for _, k := range []string{"a", "b", "c"} {
		require.NoError(t, db.Set(context.Background(), k, k))
	}
	self, err := os.Executable()
	require.NoError(t, err)
	statectl := filepath.Join(dir, "statectl")
	copyExecutable(t, self, statectl)
	check := func() (string, int) {
		cmd := exec.Command(statectl, "check", path)
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
		out, err := cmd.Output()
		return string(out), exitCode(t, err)
	}
	out, code := check()
	require.Equal(t, 0, code, out)
	require.NoError(t, os.Truncate(path+"-wal", 0)) // another program
	out, code = check()
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "shorter than the")
}
