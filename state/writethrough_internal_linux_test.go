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

// TestRewriteFileWritesPastTheCache: the repair's rewrite of a file whose
// blocks are marked unwritten goes past the page cache and leaves the file
// as it was, byte for byte and in size, its last partial block included
// (written padded, the file cut back after), its blocks marked written, and
// what the disk holds is what was cached: read again after the kernel
// dropped the file's pages, it is the same.
func TestRewriteFileWritesPastTheCache(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app.state")
	require.NoError(t, os.WriteFile(base, nil, 0o600)) // the WAL is found beside its file
	name := base + walSuffix
	want := make([]byte, 3*walChunk+5*directAlign+1234) // whole chunks, whole blocks and a tail
	for i := range want {
		want[i] = byte(i*7 + i/4096)
	}
	f, err := os.Create(name)
	require.NoError(t, err)
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(len(want))); err != nil {
		t.Skipf("this file system reserves no space ahead: %v", err)
	}
	_, err = f.WriteAt(want, 0) // cached, not written back: the blocks stay unwritten
	require.NoError(t, err)
	if !unwritten(f) {
		t.Skip("this file system keeps no extent map, or wrote the pages back already")
	}
	require.NoError(t, rewriteFile(nil, name, true))
	require.False(t, unwritten(f), "the rewrite marked every block written")
	require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	got, err := os.ReadFile(name)
	require.NoError(t, err)
	require.Equal(t, len(want), len(got), "the file's size")
	require.True(t, string(want) == string(got), "the file's bytes, read from the disk")
}
