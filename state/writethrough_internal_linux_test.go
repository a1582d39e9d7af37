package state

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestUnwrittenSeesReservedBlocks: unwritten, which decides whether the
// repair writes past the page cache, reads the extent map right: a file
// written and synced has no block marked unwritten, and one with space
// reserved ahead (fallocate, which marks its blocks unwritten as a failed
// write-back leaves them on ext4) has. Where the file system keeps no
// extent map or reserves no space the test says so and stops.
func TestUnwrittenSeesReservedBlocks(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(make([]byte, 64<<10))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.False(t, unwritten(f), "a file written and synced")
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 64<<10, 1<<20); err != nil {
		t.Skipf("this file system reserves no space ahead: %v", err)
	}
	if !unwritten(f) {
		var st unix.Statfs_t
		_ = unix.Fstatfs(int(f.Fd()), &st)
		if st.Type == unix.TMPFS_MAGIC {
			t.Skip("tmpfs keeps no extent map")
		}
	}
	require.True(t, unwritten(f), "a file with blocks reserved past its data")
}
