package faults_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state/vfs"
)

// TestKeepUnwrittenLosesLaterWritesUntilWrittenThrough: with
// SetKeepUnwritten, as ext4 does on Linux 6.18, a failed sync leaves the
// blocks its writes had to allocate unwritten: the same bytes written again
// and a sync that succeeds are lost at a power loss (zeros), though the
// page cache showed them; blocks the file had before are not marked (an
// overwrite that fails leaves the old bytes); a write past the page cache
// marks its blocks written, and after a sync they survive. Off, a later
// write and sync make the bytes durable.
func TestKeepUnwrittenLosesLaterWritesUntilWrittenThrough(t *testing.T) {
	const block = 4096
	old := bytes.Repeat([]byte("o"), block)
	grown := bytes.Repeat([]byte("g"), 2*block)
	for _, keep := range []bool{false, true} {
		m := faults.NewMemFS(1)
		m.SetKeepUnwritten(keep)
		f := open(t, m.Process(1), "db")
		write(t, f, old, 0)
		require.NoError(t, f.Sync())
		write(t, f, []byte("O"), 0) // an overwrite of a block the file had
		write(t, f, grown, block)   // two blocks the file did not have
		m.FailAt(faults.OpSync, 1)
		require.ErrorIs(t, f.Sync(), faults.ErrInjected)
		pc, ok := f.(vfs.PastCache)
		require.True(t, ok, "a MemFS file writes past the cache")
		assert.Equal(t, keep, pc.Unwritten())

		write(t, f, []byte("O"), 0)
		write(t, f, grown, block) // the same bytes again
		require.NoError(t, f.Sync())
		m.PowerLoss(faults.LossKeep)
		m.Reboot()
		got := contents(t, m, 1, "db")
		require.Len(t, got, 3*block)
		assert.Equal(t, byte('O'), got[0], "the block the file had takes the write")
		if !keep {
			assert.Equal(t, grown, got[block:], "off: the write after the failure is durable")
			continue
		}
		assert.Equal(t, make([]byte, 2*block), got[block:], "the unwritten blocks read as zeros")

		f = open(t, m.Process(1), "db")
		pc = f.(vfs.PastCache)
		require.True(t, pc.Unwritten(), "they stay unwritten across the power loss")
		require.NoError(t, pc.WriteThrough(grown, block))
		require.False(t, pc.Unwritten())
		require.NoError(t, f.Sync())
		m.PowerLoss(faults.LossKeep)
		m.Reboot()
		assert.Equal(t, grown, contents(t, m, 1, "db")[block:], "written past the cache, then synced: durable")
	}
}

// TestKeepUnwrittenHoldsAtAPowerLossThatKeepsWrites: a write to an
// unwritten block that no sync reached, which a power loss keeps
// (LossKeep), still reads as zeros: the page cache's bytes reach the disk,
// but the block reads as unwritten, as a sync's would.
func TestKeepUnwrittenHoldsAtAPowerLossThatKeepsWrites(t *testing.T) {
	const block = 4096
	grown := bytes.Repeat([]byte("g"), block)
	m := faults.NewMemFS(1)
	m.SetKeepUnwritten(true)
	f := open(t, m.Process(1), "db")
	write(t, f, grown, 0)
	m.FailAt(faults.OpSync, 1)
	require.ErrorIs(t, f.Sync(), faults.ErrInjected)
	write(t, f, grown, 0) // not synced
	m.PowerLoss(faults.LossKeep)
	m.Reboot()
	assert.Equal(t, make([]byte, block), contents(t, m, 1, "db"), "the unwritten block reads as zeros")
}
