package state_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncWatchFS is a simulated disk that counts the syncs of the database
// file the background checkpointer opens to sync apart from SQLite (read
// only: SQLite opens its files to write), and fails them once failing is
// set.
type syncWatchFS struct {
	*faults.ProcessFS
	syncs   atomic.Int64
	failing atomic.Bool
}

func (f *syncWatchFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	file, err := f.ProcessFS.Open(name, flags)
	if err != nil || flags != vfs.OpenReadOnly|vfs.OpenMainDB {
		return file, err
	}
	return watchedFile{File: file, fs: f}, nil
}

type watchedFile struct {
	vfs.File
	fs *syncWatchFS
}

func (f watchedFile) Sync() error {
	f.fs.syncs.Add(1)
	if f.fs.failing.Load() {
		return errors.New("sync: injected write-back failure")
	}
	return f.File.Sync()
}

// setUntil sets fresh keys until one fails or n have been set, and returns
// the error.
func setUntil(db *state.DB, t *testing.T, n int) error {
	for i := range n {
		if err := db.Set(t.Context(), fmt.Sprintf("k%d", i), i); err != nil {
			return err
		}
	}
	return nil
}

// The background checkpoint syncs the database file after each pass it
// runs without the lock, and a failed sync there ends the handle with
// ErrIO, as a failed sync inside SQLite does: the pages it was to make
// durable may never reach the disk.
func TestCheckpointSyncsTheFileAndAFailedSyncEndsTheHandle(t *testing.T) {
	fsys := &syncWatchFS{ProcessFS: faults.NewMemFS(1).Process(1)}
	db, err := state.Open("c.state", state.WithFS(fsys))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })

	// Background checkpoints come every few thousand writes; set keys
	// until the checkpointer has synced the file, under a generous cap.
	for i := 0; i < 100 && fsys.syncs.Load() == 0; i++ {
		require.NoError(t, setUntil(db, t, 1000))
	}
	require.Positive(t, fsys.syncs.Load(), "no background checkpoint synced the database file")

	fsys.failing.Store(true)
	err = setUntil(db, t, 100_000)
	require.Error(t, err, "a failed sync of the checkpoint went unnoticed through 100,000 writes")
	assert.ErrorIs(t, err, state.ErrIO)
	assert.Contains(t, err.Error(), "checkpoint: sync")
	assert.ErrorIs(t, db.Set(t.Context(), "after", 1), state.ErrIO, "the handle stays ended")
}

// dbSyncFailFS fails, once armed, the next sync of the database file the
// background checkpointer opens to sync apart from SQLite, through the
// disk's own fault injection: the pages that pass copied stay readable but
// never reach the disk (fsyncgate), while SQLite has counted them copied.
type dbSyncFailFS struct {
	*faults.ProcessFS
	m     *faults.MemFS
	syncs atomic.Int64
	armed atomic.Bool
}

func (f *dbSyncFailFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	file, err := f.ProcessFS.Open(name, flags)
	if err != nil || flags != vfs.OpenReadOnly|vfs.OpenMainDB {
		return file, err
	}
	return dbSyncFailFile{File: file, fs: f}, nil
}

type dbSyncFailFile struct {
	vfs.File
	fs *dbSyncFailFS
}

func (f dbSyncFailFile) Sync() error {
	f.fs.syncs.Add(1)
	if f.fs.armed.CompareAndSwap(true, false) {
		f.fs.m.FailAt(faults.OpSync, 1)
	}
	return f.File.Sync()
}

// TestFailedCheckpointSyncThenCloseKeepsAGrant: a lease is granted (its
// commit synced in the WAL), a background checkpoint copies it into the
// database file and the sync of the file fails, so the handle ends; its
// Close repairs (walrepair.go) with each of its syncs failing in turn, and
// then the power goes. The grant must survive: the WAL still holds the
// only durable copy of the pages the failed sync lost, and the Close must
// not delete it. Found by statesim -seed 3600103 -syncerror 0.05: the
// page repair's sync failed too, and the read-only connection Close keeps
// open to the end, the file's last, "checkpointed" a WAL with nothing left
// to copy and deleted it; after the power loss the token went out again.
func TestFailedCheckpointSyncThenCloseKeepsAGrant(t *testing.T) {
	ctx := t.Context()
	failing := 0
	for k := int64(0); ; k++ {
		m := faults.NewMemFS(uint64(k) + 1)
		fsys := &dbSyncFailFS{ProcessFS: m.Process(1), m: m}
		db, err := state.Open("g.state", state.WithFS(fsys))
		require.NoError(t, err)
		for i := 0; i < 100 && fsys.syncs.Load() == 0; i++ {
			require.NoError(t, setUntil(db, t, 1000))
		}
		require.Positive(t, fsys.syncs.Load(), "no background checkpoint synced the database file")
		l, err := db.Lease(ctx, "job", "a", time.Hour)
		require.NoError(t, err)
		fsys.armed.Store(true)
		err = setUntil(db, t, 100_000)
		require.ErrorIs(t, err, state.ErrIO, "the failed checkpoint sync ends the handle")
		require.Contains(t, err.Error(), "checkpoint: sync")

		before := m.Stats().Syncs
		if k > 0 {
			m.FailAt(faults.OpSync, k) // the kth sync of Close fails too
		}
		_ = db.Close()
		syncs := m.Stats().Syncs - before
		m.FailAt(faults.OpSync, 0) // a failure Close did not reach is not the reopen's
		if k > 0 && k <= syncs {
			failing++
		}
		m.PowerLoss(faults.LossDrop)
		m.Reboot()
		after, err := state.Open("g.state", state.WithFS(m.Process(2)), state.WithoutBackground())
		require.NoError(t, err, "k=%d", k)
		findings, err := after.Check(ctx)
		require.NoError(t, err)
		require.Empty(t, findings, "k=%d", k)
		infos := map[string]state.LeaseInfo{}
		require.NoError(t, after.Leases(ctx, true, func(li state.LeaseInfo) error { infos[li.Name] = li; return nil }))
		assert.Equal(t, l.Token, infos["job"].Token, "k=%d: the acknowledged grant survives the power loss", k)
		require.NoError(t, after.Close())
		if k >= syncs {
			break // every sync of Close has failed in turn
		}
	}
	assert.Positive(t, failing, "Close synced nothing")
}
