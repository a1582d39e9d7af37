package state

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state/vfs"
)

// TestEnginesOwnFileCallsYield: the files the engine opens itself on a
// vfs.FS that is a vfs.Yielder (the repair's and the loss check's, the
// descriptors it syncs the WAL and the file through) yield before every
// read, write, truncate, sync and write past the cache, as SQLite's calls
// do, so that a simulator schedules around them; asking whether blocks are
// unwritten is no disk call and does not.
func TestEnginesOwnFileCallsYield(t *testing.T) {
	m := faults.NewMemFS(1)
	yields := 0
	m.SetYield(func(int) { yields++ })
	fsys := m.Process(1)
	f, err := fsys.Open("/sim/y-wal", vfs.OpenReadWrite|vfs.OpenCreate|vfs.OpenWAL)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("0123456789"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Zero(t, yields, "a file the engine opens on the FS itself yields only as yielding wraps it")

	rw, err := openForRewrite(fsys, "/sim/y-wal")
	require.NoError(t, err)
	step := func(what string, call func()) {
		t.Helper()
		before := yields
		call()
		assert.Equal(t, before+1, yields, "%s yields once", what)
	}
	buf := make([]byte, 4)
	step("a read", func() { _, err := rw.ReadAt(buf, 0); require.NoError(t, err) })
	step("a write", func() { _, err := rw.WriteAt(buf, 4); require.NoError(t, err) })
	step("a sync", func() { require.NoError(t, rw.Sync()) })
	file := rw.(vfs.File)
	step("a truncate", func() { require.NoError(t, file.Truncate(10)) })
	pc, ok := rw.(vfs.PastCache)
	require.True(t, ok, "the simulated disk's files write past the cache, and so do their yielding wrappers")
	step("a write past the cache", func() { require.NoError(t, pc.WriteThrough(buf, 0)) })
	before := yields
	pc.Unwritten()
	assert.Equal(t, before, yields, "asking for unwritten blocks is no disk call")
	require.NoError(t, rw.Close())

	s, err := openSyncer(fsys, "/sim/y", "-wal", vfs.OpenWAL)
	require.NoError(t, err)
	step("the engine's own sync of the WAL", func() { require.NoError(t, s.Sync()) })
	require.NoError(t, s.Close())

	// An FS that is no Yielder: the file as the FS opened it.
	name := filepath.Join(t.TempDir(), "x-wal")
	require.NoError(t, os.WriteFile(name, []byte("0123"), 0o600))
	plain, err := openForRewrite(vfs.OS(), name)
	require.NoError(t, err)
	_, wrapped := plain.(yieldFile)
	_, wrappedPC := plain.(yieldPastCache)
	assert.False(t, wrapped || wrappedPC, "%T", plain)
	require.NoError(t, plain.Close())
}
