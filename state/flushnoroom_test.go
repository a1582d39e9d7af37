package state_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walSizeLimitFS is a simulated disk whose WAL, while limit is set, may
// not grow past limit bytes: a write past it fails for want of room (a
// file size limit, RLIMIT_FSIZE, or a full disk), while writes inside the
// file's length, over space it already holds, succeed.
type walSizeLimitFS struct {
	*faults.ProcessFS
	limit atomic.Int64 // 0: none
}

func (f *walSizeLimitFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	file, err := f.ProcessFS.Open(name, flags)
	if err != nil || flags&vfs.OpenWAL == 0 {
		return file, err
	}
	return walSizeLimitFile{File: file, fs: f}, nil
}

type walSizeLimitFile struct {
	vfs.File
	fs *walSizeLimitFS
}

func (f walSizeLimitFile) WriteAt(p []byte, off int64) (int, error) {
	if l := f.fs.limit.Load(); l > 0 && off+int64(len(p)) > l {
		return 0, fmt.Errorf("write past the WAL's size limit: %w", vfs.ErrNoSpace)
	}
	return f.File.WriteAt(p, off)
}

// TestFlushOutOfRoomMidTransactionCountsOnce: a flush of more increments
// than SQLite's page cache holds writes pages to the WAL before its
// COMMIT; when one of those writes finds no room, SQLite rolls the whole
// transaction back. The flush must stop there, say the disk is full and
// keep every delta for the next flush. Before, it went on: the keys after
// the failure were written one by one in autocommit over the WAL's space
// the rollback gave back, the COMMIT failed ("no transaction is active"),
// and every delta went back into the buffer, so the next flush counted
// those keys twice.
func TestFlushOutOfRoomMidTransactionCountsOnce(t *testing.T) {
	fsys := &walSizeLimitFS{ProcessFS: faults.NewMemFS(1).Process(1)}
	db, err := state.Open("room.state", state.WithFS(fsys), state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	pad := strings.Repeat("x", 200) // 12,000 keys: pages past the cache's 2 MB
	key := func(i int) string { return fmt.Sprintf("%s%06d", pad, i) }
	const n = 12000
	for i := range n {
		require.NoError(t, db.IncrBuffered(key(i), 1))
	}
	fsys.limit.Store(1 << 20)
	err = db.Flush(ctx)
	assert.ErrorIs(t, err, state.ErrDiskFull, "the flush's own trouble, not the COMMIT's")
	assert.Contains(t, err.Error(), "kept for the next flush")
	fsys.limit.Store(0)
	require.NoError(t, db.Flush(ctx))
	counts := map[string]int{}
	for i := range n {
		v, err := db.Get(ctx, key(i))
		require.NoError(t, err)
		counts[v.String()]++
	}
	assert.Equal(t, map[string]int{"1": n}, counts, "every key counted once")
}
