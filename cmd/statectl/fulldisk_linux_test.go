//go:build linux

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

// TestReadsOnAFullDisk: a state file closed by its writer sits on a full
// disk, where SQLite has no room to create and grow the -shm file it reads
// a WAL file with. The read commands still answer, from a private copy
// elsewhere, though the Open that failed first left an empty -wal and a
// stub -shm beside the file; the file is left as it was and the copy
// removed. A file whose -wal holds commits (a writer that crashed) is read
// from a copy of the file and its -wal, with those commits, and its -wal
// is left as it was. Needs root, to mount a 1 MB tmpfs.
func TestReadsOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	data, tmp := t.TempDir(), t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", data).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %s", out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", data).Run() })

	ctx := context.Background()
	path := filepath.Join(data, "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Set(ctx, "k", "hello"))
	require.NoError(t, db.Close())
	// A file whose -wal holds a commit, as a writer that crashed leaves
	// it: a copy of a handle's file and -wal while it is open.
	crashed := filepath.Join(data, "crashed.state")
	db, err = state.Open(filepath.Join(tmp, "w.state"), state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Set(ctx, "only-in-the-wal", "x"))
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(filepath.Join(tmp, "w.state") + suffix)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(crashed+suffix, b, 0o600))
	}
	require.NoError(t, db.Close())
	require.NoError(t, os.Remove(filepath.Join(tmp, "w.state")))
	fill(t, filepath.Join(data, "filler"))
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	self, err := os.Executable()
	require.NoError(t, err)
	statectl := filepath.Join(t.TempDir(), "statectl")
	copyExecutable(t, self, statectl)
	run := func(args ...string) (string, string, int) { return runStatectl(t, statectl, tmp, -1, args...) }

	out, errOut, code := run("get", path, "k")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "hello\n", out)
	out, errOut, code = run("dump", path)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "k\tbytes\t-\thello")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the file is untouched")

	crashedWAL, err := os.ReadFile(crashed + "-wal")
	require.NoError(t, err)
	out, errOut, code = run("get", crashed, "only-in-the-wal")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "x\n", out, "the copy holds the -wal's commit")
	after, err = os.ReadFile(crashed + "-wal")
	require.NoError(t, err)
	assert.Equal(t, crashedWAL, after, "the -wal is untouched")

	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "every private copy is removed")
}

// fill writes the file at path until the disk is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 4<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			return
		}
	}
}
