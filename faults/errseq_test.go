package faults

import (
	"testing"

	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFailedSyncIsReportedToEveryOpenFile: as on Linux 4.13+, a failed sync
// is reported once to each file open on the inode when it failed, so a
// second handle cannot sync over the hole the failure left.
func TestFailedSyncIsReportedToEveryOpenFile(t *testing.T) {
	m := NewMemFS(1)
	p := m.Process(1)
	a, err := p.Open("/f", vfs.OpenReadWrite|vfs.OpenCreate)
	require.NoError(t, err)
	b, err := p.Open("/f", vfs.OpenReadWrite)
	require.NoError(t, err)
	_, err = a.WriteAt([]byte("x"), 0)
	require.NoError(t, err)

	m.FailAt(OpSync, 1)
	require.ErrorIs(t, a.Sync(), ErrInjected)
	assert.NoError(t, a.Sync(), "the file that saw the failure is not told twice")
	assert.ErrorIs(t, b.Sync(), ErrInjected, "another open file is told at its next sync")
	assert.NoError(t, b.Sync(), "once")

	c, err := p.Open("/f", vfs.OpenReadWrite)
	require.NoError(t, err)
	assert.NoError(t, c.Sync(), "a file opened after the failure is not told")
}
