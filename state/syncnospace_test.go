package state_test

import (
	"fmt"
	"io/fs"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noRoomAtSyncFS is a simulated disk whose WAL, once armed, fails its next
// sync with ENOSPC, as a file system that allocates blocks only at
// write-back reports writes it had accepted and could not store (NFS,
// thin provisioning). The error wraps vfs.ErrNoSpace too, as an FS may.
type noRoomAtSyncFS struct {
	*faults.ProcessFS
	armed atomic.Bool
}

func (f *noRoomAtSyncFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	file, err := f.ProcessFS.Open(name, flags)
	if err != nil || flags&vfs.OpenWAL == 0 {
		return file, err
	}
	return noRoomAtSyncFile{File: file, fs: f}, nil
}

type noRoomAtSyncFile struct {
	vfs.File
	fs *noRoomAtSyncFS
}

func (f noRoomAtSyncFile) Sync() error {
	if f.fs.armed.CompareAndSwap(true, false) {
		cause := &fs.PathError{Op: "sync", Path: "wal", Err: syscall.ENOSPC}
		return fmt.Errorf("%w: %w", vfs.ErrNoSpace, cause)
	}
	return f.File.Sync()
}

// A sync that fails for want of room has lost writes the file system had
// taken: it is an I/O error that ends the handle, never ErrDiskFull (which
// leaves the handle running, as if only the failed transaction were
// gone). A reopened file has the grant either whole or not at all, and
// hands out no token twice.
func TestSyncThatFindsNoRoomEndsTheHandle(t *testing.T) {
	ctx := t.Context()
	fsys := &noRoomAtSyncFS{ProcessFS: faults.NewMemFS(1).Process(1)}
	db, err := state.Open("n.state", state.WithFS(fsys))
	require.NoError(t, err)
	first, err := db.Lease(ctx, "job", "a", time.Hour)
	require.NoError(t, err)
	require.NoError(t, db.Release(ctx, first))

	fsys.armed.Store(true)
	_, err = db.Lease(ctx, "job", "b", time.Hour) // a FULL commit: SQLite syncs the WAL
	require.Error(t, err)
	assert.False(t, fsys.armed.Load(), "the grant did not sync the WAL")
	assert.ErrorIs(t, err, state.ErrIO)
	assert.NotErrorIs(t, err, state.ErrDiskFull, "a failed sync reported as a full disk")
	assert.ErrorIs(t, err, syscall.ENOSPC, "the cause is lost")
	assert.ErrorIs(t, db.Set(ctx, "after", 1), state.ErrIO, "the handle goes on after a failed sync")
	_ = db.Close()

	db, err = state.Open("n.state", state.WithFS(fsys))
	require.NoError(t, err)
	defer db.Close()
	again, err := db.Lease(ctx, "job", "c", time.Minute)
	if err != nil {
		// The failed grant may have reached the disk: then it holds the
		// lease, with its own token.
		require.ErrorIs(t, err, state.ErrLeaseHeld)
		return
	}
	assert.Greater(t, again.Token, first.Token)
}

// noRoomAtSQLiteSyncFS is a simulated disk whose files opened by SQLite
// (to write: the engine opens its own descriptors read only), once armed,
// fail their next sync with ENOSPC, wrapping vfs.ErrNoSpace, as
// noRoomAtSyncFS's WAL does. A grant no longer syncs through SQLite (the
// engine syncs the WAL through its own descriptor after COMMIT); a
// checkpoint still does, the WAL and then the database file.
type noRoomAtSQLiteSyncFS struct {
	*faults.ProcessFS
	armed atomic.Bool
}

func (f *noRoomAtSQLiteSyncFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	file, err := f.ProcessFS.Open(name, flags)
	if err != nil || flags&vfs.OpenReadOnly != 0 {
		return file, err
	}
	return noRoomAtSQLiteSyncFile{File: file, fs: f}, nil
}

type noRoomAtSQLiteSyncFile struct {
	vfs.File
	fs *noRoomAtSQLiteSyncFS
}

func (f noRoomAtSQLiteSyncFile) Sync() error {
	if f.fs.armed.CompareAndSwap(true, false) {
		cause := &fs.PathError{Op: "sync", Path: "file", Err: syscall.ENOSPC}
		return fmt.Errorf("%w: %w", vfs.ErrNoSpace, cause)
	}
	return f.File.Sync()
}

// TestSQLiteSyncThatFindsNoRoomEndsTheHandle: a sync SQLite itself makes,
// here the WAL's at the start of the checkpoint a handle without a
// background checkpointer runs every thousand pages, fails with ENOSPC:
// the VFS's xSync must report it as SQLITE_IOERR_FSYNC, so that the
// checkpoint's failure ends the handle with ErrIO. TestSyncThatFindsNoRoomEndsTheHandle
// no longer reaches xSync (grants sync through the engine's own
// descriptor); this fails with xSync reporting ENOSPC as SQLITE_FULL:
// the checkpoint's error is then a full disk, not fatal, and the handle
// goes on writing.
func TestSQLiteSyncThatFindsNoRoomEndsTheHandle(t *testing.T) {
	ctx := t.Context()
	fsys := &noRoomAtSQLiteSyncFS{ProcessFS: faults.NewMemFS(1).Process(1)}
	db, err := state.Open("s.state", state.WithFS(fsys), state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	fsys.armed.Store(true)
	for i := 0; i < 100_000 && fsys.armed.Load(); i++ {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%d", i), i))
	}
	require.False(t, fsys.armed.Load(), "no checkpoint synced through SQLite in 100,000 writes")
	err = db.Set(ctx, "after", 1)
	require.Error(t, err, "the handle goes on after a failed sync")
	assert.ErrorIs(t, err, state.ErrIO)
	assert.NotErrorIs(t, err, state.ErrDiskFull, "a failed sync reported as a full disk")
}
