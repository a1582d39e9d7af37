package state_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cutFailFS is a simulated disk on which, once armed, the sync of the WAL
// through a descriptor the engine opens to rewrite it (read-write, not to
// create: SQLite opens its WAL to create) fails: the cut walfull.go makes
// after a write refused for room, or a repair's rewrite.
type cutFailFS struct {
	*faults.ProcessFS
	armed atomic.Bool
	cuts  atomic.Int64
}

func (f *cutFailFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	file, err := f.ProcessFS.Open(name, flags)
	if err != nil || flags != vfs.OpenReadWrite|vfs.OpenWAL || !f.armed.Load() {
		return file, err
	}
	return cutFailFile{File: file, fs: f}, nil
}

type cutFailFile struct {
	vfs.File
	fs *cutFailFS
}

func (f cutFailFile) Sync() error {
	if f.fs.armed.CompareAndSwap(true, false) {
		f.fs.cuts.Add(1)
		return errors.New("sync: injected write-back failure")
	}
	return f.File.Sync()
}

// TestRefusedWriteWhoseCutFailsEndsTheHandle: a write refused for want of
// room is followed by a cut of the WAL back to its last committed frame,
// synced (walfull.go); when that cut fails, the refused commit's frames
// may come back after a crash, so the verb's outcome is unknown: it is
// ErrIO, not ErrDiskFull, and the handle ends. It fails with refusedWrite
// answering the write's ErrDiskFull whatever the cut did.
func TestRefusedWriteWhoseCutFailsEndsTheHandle(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	fsys := &cutFailFS{ProcessFS: m.Process(1)}
	db, err := state.Open("/sim/cut.state", state.WithFS(fsys), state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	for i := range 20 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
	}
	fsys.armed.Store(true)
	m.SetWriteBudget(0) // the disk is full
	err = db.Set(ctx, "big", strings.Repeat("w", 3000))
	require.Error(t, err)
	assert.Equal(t, int64(1), fsys.cuts.Load(), "the refused write's cut synced the WAL, and failed")
	assert.ErrorIs(t, err, state.ErrIO, "a refused write whose frames could not be cut")
	assert.NotErrorIs(t, err, state.ErrDiskFull, "the handle has ended: not a full disk to retry")
	m.SetWriteBudget(-1) // room again
	_, err = db.Get(ctx, "k00")
	assert.ErrorIs(t, err, state.ErrIO, "the handle ends")
}

// TestRefusedWriteCutSparesAnotherProcessesCommit: after a write refused
// for want of room the engine cuts the WAL back to the end of the last
// frame its index named when it looked, then takes the write lock and
// cuts (walfull.go); a commit another process makes between the look and
// the lock appends frames past that end, and the cut must then not be
// made. Process 2 makes a grant, synced, at each of process 1's disk calls
// from its refused write on, in turn (room is back by then); after a power
// loss the grant must be there. It fails when the cut skips its check
// that no other process committed meanwhile: the cut takes the synced
// grant's frames, and the token is handed out again.
func TestRefusedWriteCutSparesAnotherProcessesCommit(t *testing.T) {
	ctx := t.Context()
	const path = "/sim/cutrace.state"
	inWindow := 0
	for k := 1; ; k++ {
		m := faults.NewMemFS(uint64(k))
		open := func(pid int) *state.DB {
			db, err := state.Open(path, state.WithFS(m.Process(pid)), state.WithoutBackground())
			require.NoError(t, err)
			return db
		}
		p1, p2 := open(1), open(2)
		for i := range 20 {
			require.NoError(t, p1.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
		}
		var calls int
		var granted *state.Lease
		var grantErr error
		inside := false
		m.SetYield(func(pid int) {
			if pid != 1 || inside {
				return
			}
			calls++
			if calls != k {
				return
			}
			inside = true
			m.SetWriteBudget(-1) // room is back, for process 2
			// While process 1 holds the write lock the grant waits for
			// it, in vain (this is process 1's goroutine): not long.
			short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			granted, grantErr = p2.Lease(short, "job", "p2", time.Hour)
			inside = false
		})
		m.SetWriteBudget(0) // the disk is full
		err := p1.Set(ctx, "big", strings.Repeat("w", 3000))
		m.SetYield(nil)
		m.SetWriteBudget(-1)
		if calls < k {
			_ = p1.Close()
			_ = p2.Close()
			break // process 1 made fewer disk calls than k: every one had its turn
		}
		if granted == nil {
			// The grant waited for process 1's lock, or came before the
			// refused write met the full disk: nothing to check here.
			_ = p1.Close()
			_ = p2.Close()
			continue
		}
		require.NoError(t, grantErr)
		if errors.Is(err, state.ErrDiskFull) {
			inWindow++ // the write was refused, and the grant came while it was
		}
		m.PowerLoss(faults.LossDrop)
		m.Reboot()
		after := open(3)
		findings, err := after.Check(ctx)
		require.NoError(t, err)
		require.Empty(t, findings, "grant at call %d", k)
		infos := map[string]state.LeaseInfo{}
		require.NoError(t, after.Leases(ctx, true, func(li state.LeaseInfo) error { infos[li.Name] = li; return nil }))
		require.Equal(t, granted.Token, infos["job"].Token, "grant at process 1's call %d: the synced grant survives the power loss", k)
		require.NoError(t, after.Close())
	}
	assert.Positive(t, inWindow, "no grant came while a refused write was handled")
}
