package state

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ckptSyncFailFS fails, once armed, the next sync of the database file the
// background checkpointer opens to sync apart from SQLite (read only:
// SQLite opens its files to write), through the disk's own fault
// injection: the pages that pass copied stay readable but never reach the
// disk, while SQLite has counted them copied.
type ckptSyncFailFS struct {
	*faults.ProcessFS
	m     *faults.MemFS
	armed atomic.Bool
}

func (f *ckptSyncFailFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	file, err := f.ProcessFS.Open(name, flags)
	if err != nil || flags != vfs.OpenReadOnly|vfs.OpenMainDB {
		return file, err
	}
	return ckptSyncFailFile{File: file, fs: f}, nil
}

type ckptSyncFailFile struct {
	vfs.File
	fs *ckptSyncFailFS
}

func (f ckptSyncFailFile) Sync() error {
	if f.fs.armed.CompareAndSwap(true, false) {
		f.fs.m.FailAt(faults.OpSync, 1)
	}
	return f.File.Sync()
}

// TestFailedCheckpointWithNothingLeftKeepsTheWALAtClose: a lease is
// granted, then a background checkpoint copies the whole WAL into the
// database file and its sync of the file fails, with no commit after it:
// the WAL holds nothing the file lacks. The failed handle's Close must
// keep the -wal file (keepWAL on the read-only connection closeFailed
// keeps open, the file's last); the directory is then made durable (as a
// later create in it, or the file system's own journal commit, would) and
// the power goes: the grant must be there after it.
//
// TestFailedCheckpointSyncThenCloseKeepsAGrant cannot show the WAL kept:
// commits follow its failed checkpoint, so at Close the WAL has frames
// left to copy, and SQLite's own close checkpoint stops at its sync of
// the file (its descriptor is told of the earlier failed write-back) and
// keeps the WAL whatever the handle does; and a WAL deleted without a
// directory sync comes back at its power loss (LossDrop) anyway. Here,
// with keepWAL (open.go) returning nil at once, the read-only connection
// "checkpoints" the empty WAL as it closes and deletes it: the test fails
// on "the failed handle's Close keeps the WAL". (The grant itself survives
// that mutation here: SQLite's last pass synced the file before the
// checkpointer's own sync failed, so the failure lost no page.)
func TestFailedCheckpointWithNothingLeftKeepsTheWALAtClose(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	clock := faults.NewClock(time.UnixMilli(1_700_000_000_000))
	const path = "/sim/keep.state"
	fsys := &ckptSyncFailFS{ProcessFS: m.Process(1), m: m}
	// The checkpointer runs only when this test calls it: no write kicks it.
	db, err := Open(path, WithFS(fsys), WithClock(clock), WithSweepInterval(0),
		hooks.Option(hooks.Engine{CheckpointEvery: 1 << 30}).(Option))
	require.NoError(t, err)
	for i := range 40 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
	}
	l, err := db.Lease(ctx, "job", "a", time.Hour) // synced in the WAL
	require.NoError(t, err)
	require.NotNil(t, db.bg.ckpt.conn, "the handle has a checkpointer's connection")
	fsys.armed.Store(true)
	db.bg.ckpt.checkpoint(db)
	require.False(t, fsys.armed.Load(), "the checkpointer synced the database file")
	db.lock()
	failed := db.failed
	db.unlock()
	require.ErrorIs(t, failed, ErrIO, "the checkpoint's failed sync ends the handle")
	_ = db.Close()

	p := m.Process(3)
	kept, err := p.Exists(path + walSuffix)
	require.NoError(t, err)
	assert.True(t, kept, "the failed handle's Close keeps the WAL")
	require.NoError(t, p.SyncDir(path), "the directory, and whatever Close did to it, made durable")
	m.PowerLoss(faults.LossDrop)
	m.Reboot()

	after, err := Open(path, WithFS(m.Process(2)), WithClock(clock), WithoutBackground())
	require.NoError(t, err)
	defer after.Close()
	findings, err := after.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, findings)
	infos := map[string]LeaseInfo{}
	require.NoError(t, after.Leases(ctx, true, func(li LeaseInfo) error { infos[li.Name] = li; return nil }))
	assert.Equal(t, l.Token, infos["job"].Token, "the acknowledged grant survives the power loss")
}
