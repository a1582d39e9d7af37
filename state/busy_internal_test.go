package state

import (
	"path/filepath"
	"testing"

	"github.com/statekit/statekit/faults"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBusyHandlerIsInstalled: the engine's busy handler replaces SQLite's
// on the handle's connection, on the native VFS and through WithFS. It
// needs the SQLite handle modernc.org/sqlite keeps: a driver version
// without it fails here, not silently in production.
func TestBusyHandlerIsInstalled(t *testing.T) {
	native, err := Open(filepath.Join(t.TempDir(), "b.state"), WithoutBackground())
	require.NoError(t, err)
	defer native.Close()
	assert.NotZero(t, native.busyID)
	memfs, err := Open("b.state", WithFS(faults.NewMemFS(1).Process(1)), WithoutBackground())
	require.NoError(t, err)
	defer memfs.Close()
	assert.NotZero(t, memfs.busyID)
	id := native.busyID
	_, ok := busyHandles.Load(id)
	assert.True(t, ok)
	require.NoError(t, native.Close())
	_, ok = busyHandles.Load(id)
	assert.False(t, ok, "Close forgets the handle")
}
