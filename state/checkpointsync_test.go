package state_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

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
