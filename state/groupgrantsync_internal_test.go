package state

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walSyncWatchFS calls onSync at the start of each sync of the WAL through
// the descriptor the engine opens to sync it apart from SQLite (read only:
// SQLite opens its files to write), the sync a grant waits for.
type walSyncWatchFS struct {
	*faults.ProcessFS
	onSync func()
}

func (f *walSyncWatchFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	file, err := f.ProcessFS.Open(name, flags)
	if err != nil || flags != vfs.OpenReadOnly|vfs.OpenWAL {
		return file, err
	}
	return walSyncWatchFile{File: file, fs: f}, nil
}

type walSyncWatchFile struct {
	vfs.File
	fs *walSyncWatchFS
}

func (f walSyncWatchFile) Sync() error {
	if f.fs.onSync != nil {
		f.fs.onSync()
	}
	return f.File.Sync()
}

// TestGroupedGrantsAnsweredAfterTheirSync: grants called at the same
// moment share one COMMIT and one sync of the WAL after it (syncGrant), and
// no caller of the group is answered before that sync: a grant answered
// between COMMIT and the sync is lost to a power loss in between, and its
// token handed out again. The test holds the handle's lock while the
// callers queue, so the group is formed; at the start of the group's WAL
// sync it waits a moment for any caller already answered to say so, and
// none may have. It fails with runTogether answering the group's verbs
// before syncGrant ("answered before the group's WAL sync began").
func TestGroupedGrantsAnsweredAfterTheirSync(t *testing.T) {
	ctx := context.Background()
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := faults.NewMemFS(1)
	fsys := &walSyncWatchFS{ProcessFS: m.Process(1)}
	db, err := Open("/sim/grants.state", WithFS(fsys), WithClock(clock), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Lease(ctx, "warm", "a", time.Minute) // the WAL's syncer open, its directory synced
	require.NoError(t, err)

	const grants = 4
	var answered, syncs atomic.Int64
	var early atomic.Int64 // callers answered when a sync of the group began
	fsys.onSync = func() {
		syncs.Add(1)
		time.Sleep(50 * time.Millisecond) // an answered caller has time to count itself
		early.Store(max(early.Load(), answered.Load()))
	}
	db.mu.Lock() // the callers queue behind the lock the test holds
	answers := make(chan error, grants)
	for i := range grants {
		go func() {
			_, err := db.Lease(ctx, fmt.Sprintf("L%d", i), "g", time.Minute)
			answered.Add(1)
			answers <- err
		}()
	}
	for db.q.queued() < grants {
		runtime.Gosched()
	}
	db.unlock() // the oldest caller leads, and takes the others into its group
	for range grants {
		require.NoError(t, <-answers)
	}
	assert.Equal(t, int64(1), syncs.Load(), "the group's grants share one sync of the WAL")
	assert.Zero(t, early.Load(), "a grouped grant's caller answered before the group's WAL sync began")
}
