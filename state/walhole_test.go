package state_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
)

// holeKeys is how many keys dropHole sets.
const holeKeys = 40

// dropHole opens process 1 on a disk that drops a failed sync's writes
// (XFS), sets keys k00..k39 to "v...", closes and opens again (they are in
// the file, the WAL starts over), grants a lease (it syncs the WAL), then
// makes NORMAL commits: with grow, new keys k40..k79 (the file grows, so
// its first page, which holds its size, is among them); else it overwrites
// k00..k19 with "w..." (the same size: the first page is not among them).
// Then the sync of the next grant fails: the frames of those commits and
// of the grant read back as zeros. With keep the failed handle leaves the
// shared index as it was (keepIndex), still counting them. It returns the
// disk, the failed handle and open.
func dropHole(t *testing.T, grow, keep bool) (*faults.MemFS, *state.DB, func(pid int) (*state.DB, error)) {
	t.Helper()
	m, db, _, open := dropHoleBeside(t, grow, keep, false)
	return m, db, open
}

// dropHoleBeside is dropHole, and with beside it also opens process 2 on
// the file before the failed sync, and returns that handle.
func dropHoleBeside(t *testing.T, grow, keep, beside bool) (*faults.MemFS, *state.DB, *state.DB, func(pid int) (*state.DB, error)) {
	t.Helper()
	ctx := context.Background()
	m := faults.NewMemFS(1)
	m.SetDropFailedSyncs(true)
	clock := newClock()
	opts := []state.Option{state.WithClock(clock), state.WithoutBackground()}
	if keep {
		opts = append(opts, keepIndex)
	}
	open := func(pid int) (*state.DB, error) {
		return state.Open("/sim/hole.state", append([]state.Option{state.WithFS(m.Process(pid))}, opts...)...)
	}
	db, err := open(1)
	require.NoError(t, err)
	for i := range holeKeys {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
	}
	require.NoError(t, db.Close()) // the keys go into the file, and the WAL starts over
	db, err = open(1)
	require.NoError(t, err)
	var other *state.DB
	if beside {
		other, err = open(2)
		require.NoError(t, err)
	}
	_, err = db.Lease(ctx, "durable", "a", time.Minute)
	require.NoError(t, err)
	from, to := 0, holeKeys/2
	if grow {
		from, to = holeKeys, 2*holeKeys
	}
	for i := from; i < to; i++ {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("w", 300)))
	}
	m.FailAt(faults.OpSync, 1)
	_, err = db.Lease(ctx, "job", "a", time.Minute)
	require.ErrorIs(t, err, state.ErrIO)
	return m, db, other, open
}

// TestFailedSyncHasTheIndexRebuilt: on a file system that drops a failed
// sync's writes, the handle whose sync failed marks the WAL's shared index
// for rebuilding (state/indexforget.go), so that no handle reads through
// the frames the sync took back. A handle opened before the failure, and
// an Open beside the failed handle after it, both find the file as its last
// durable commit left it, sound (not the zeros, which read as damage, nor
// a hole's ErrIO), and write on it; and so it stays once every handle has
// closed, and after a power loss.
func TestFailedSyncHasTheIndexRebuilt(t *testing.T) {
	for _, grow := range []bool{false, true} {
		t.Run(fmt.Sprintf("first page in the hole=%v", grow), func(t *testing.T) {
			ctx := t.Context()
			m, failed, before, open := dropHoleBeside(t, grow, false, true)
			requireLastDurable(t, before, "a handle opened before the failed sync")
			after, err := open(5)
			require.NoError(t, err, "an Open beside the failed handle")
			requireLastDurable(t, after, "an Open beside the failed handle")
			for _, db := range []*state.DB{before, after} {
				require.NoError(t, db.Set(ctx, "k00", strings.Repeat("v", 300)))
				_, err := db.Incr(ctx, "written after")
				require.NoError(t, err)
			}
			n, err := before.Get(ctx, "written after")
			require.NoError(t, err)
			require.Equal(t, "2", n.String(), "both handles wrote on the rebuilt index")
			require.NoError(t, before.Close())
			require.NoError(t, after.Close())
			_ = failed.Close()
			requireReopens(t, m, open)
		})
	}
}

// requireLastDurable requires db to be sound and to hold what dropHole made
// durable, k00..k39 at "v...", and none of what the failed sync dropped.
func requireLastDurable(t *testing.T, db *state.DB, what string) {
	t.Helper()
	ctx := context.Background()
	findings, err := db.Check(ctx)
	require.NoError(t, err, what)
	require.Empty(t, findings, what)
	for i := range 2 * holeKeys {
		v, err := db.Get(ctx, fmt.Sprintf("k%02d", i))
		if i >= holeKeys {
			require.ErrorIs(t, err, state.ErrNotFound, "%s: k%02d was dropped", what, i)
			continue
		}
		require.NoError(t, err, "%s: k%02d", what, i)
		require.Equal(t, strings.Repeat("v", 300), v.String(), "%s: k%02d as last made durable", what, i)
	}
}

// keepIndex has the handle leave the shared index as it was after a failed
// sync, for the tests of a hole nobody marked for rebuilding: a file system
// that dropped the pages when its write-back failed, before any sync
// reported it.
var keepIndex = hooks.Option(hooks.Engine{KeepIndexAfterFailedSync: true}).(state.Option)

// TestDroppedSyncHoleRefusedAtOpen: on a file system that drops a failed
// sync's writes, the WAL reads back zeros where the shared index counts
// committed frames (here nobody marked it for rebuilding: keepIndex).
// An Open beside the failed handle must refuse (ErrIO,
// naming the lost frames) rather than rewrite those zeros and checkpoint
// them into the file, and before it reads through them (a first page of
// zeros is "not an SQLite database"). Once every handle has closed, the
// next Open rebuilds the index from the WAL and opens at the last durable
// commit, sound, and so it stays after a power loss.
func TestDroppedSyncHoleRefusedAtOpen(t *testing.T) {
	for _, grow := range []bool{false, true} {
		t.Run(fmt.Sprintf("first page in the hole=%v", grow), func(t *testing.T) {
			m, failed, open := dropHole(t, grow, true)
			other, err := open(2)
			if err == nil {
				_ = other.Close()
			}
			require.ErrorIs(t, err, state.ErrIO, "an Open beside the failed handle meets the hole")
			assert.Contains(t, err.Error(), "lost frames its index counts as committed, from frame")
			assert.Contains(t, err.Error(), "the file system dropped writes that a sync which failed was to make durable")
			_ = failed.Close()
			requireReopens(t, m, open)
		})
	}
}

// TestDroppedSyncHoleNotRepairedAtClose: the failed handle is the file's
// only one and closes; its Close must not rewrite the zeros the WAL reads
// back, nor let a checkpoint copy them into the file: the next Open, and
// the one after a power loss, find the last durable commit, sound.
func TestDroppedSyncHoleNotRepairedAtClose(t *testing.T) {
	for _, grow := range []bool{false, true} {
		t.Run(fmt.Sprintf("first page in the hole=%v", grow), func(t *testing.T) {
			m, failed, open := dropHole(t, grow, false)
			_ = failed.Close()
			requireReopens(t, m, open)
		})
	}
}

// requireReopens requires the file, alone on the disk, to open at the last
// durable commit, and to again after a power loss.
func requireReopens(t *testing.T, m *faults.MemFS, open func(pid int) (*state.DB, error)) {
	t.Helper()
	after, err := open(3)
	require.NoError(t, err, "alone on the file, Open recovers from the WAL")
	requireLastDurable(t, after, "reopened")
	require.NoError(t, after.Close())

	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	after, err = open(4)
	require.NoError(t, err)
	requireLastDurable(t, after, "after a power loss")
	require.NoError(t, after.Close())
}

// TestWALStartedOverIsNoHole: after a checkpoint copied the whole WAL, the
// next commit starts the WAL over from its first frame with new salts, and
// the frames of the WAL before stay past the index's last frame, breaking
// the checksum chain there. That is no hole: an Open beside the handle, on
// the operating system's files, opens, and both see every key.
func TestWALStartedOverIsNoHole(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "restart.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	for i := range holeKeys {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
	}
	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer raw.Close()
	var busy, frames, copied int
	require.NoError(t, raw.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied))
	require.Equal(t, frames, copied, "the whole WAL was copied")
	before := walSize(t, path)
	require.NoError(t, db.Set(ctx, "restarted", "yes"))
	require.Equal(t, before, walSize(t, path), "the WAL started over, its old frames past the new ones")

	other, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err, "frames past the index's last are no hole")
	defer other.Close()
	for _, h := range []*state.DB{db, other} {
		v, err := h.Get(ctx, "restarted")
		require.NoError(t, err)
		assert.Equal(t, "yes", v.String())
		_, err = h.Get(ctx, fmt.Sprintf("k%02d", holeKeys-1))
		require.NoError(t, err)
	}
}

// TestOverwrittenWALFrameRefusedAtOpen: on the operating system's files, a
// committed frame of the WAL overwritten behind the open handle's back (as
// a file system that drops a failed sync's pages leaves it) is found by
// the next Open beside it through the -shm file's index, which refuses
// with ErrIO, leaving the WAL and the file as they were.
func TestOverwrittenWALFrameRefusedAtOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "overwritten.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	for i := range holeKeys {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
	}
	wal, err := os.OpenFile(path+"-wal", os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = wal.WriteAt(bytes.Repeat([]byte{0xa5}, 512), 32+24+2048) // inside the first frame's page
	require.NoError(t, err)
	require.NoError(t, wal.Close())
	walBefore, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	fileBefore, err := os.ReadFile(path)
	require.NoError(t, err)

	other, err := state.Open(path, state.WithoutBackground())
	if err == nil {
		_ = other.Close()
	}
	require.ErrorIs(t, err, state.ErrIO)
	assert.Contains(t, err.Error(), "lost frames its index counts as committed, from frame 1 of")
	walAfter, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	fileAfter, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, walBefore, walAfter, "the WAL was left as it was")
	assert.Equal(t, fileBefore, fileAfter, "and nothing was copied into the file")
}

func init() {
	helperRoles["walhole-open"] = helperOpenSayIO
}

// helperOpenSayIO opens path and says "open ok", or "open failed", whether
// the error is ErrIO and its text, on one line.
func helperOpenSayIO(path string) int {
	db, err := state.Open(path, state.WithoutBackground())
	if err != nil {
		fmt.Printf("open failed io=%v %s\n", errors.Is(err, state.ErrIO), strings.ReplaceAll(err.Error(), "\n", " "))
		return 0
	}
	fmt.Println("open ok")
	_ = db.Close()
	return 0
}

// TestOverwrittenWALFrameRefusedByAnotherProcess: as above, but the frames
// overwritten are those of the file's first page, and the Open runs in
// another process: it reads the index from the -shm file before any of its
// connections reads through the WAL (which would find "not an SQLite
// database"), and refuses with ErrIO.
func TestOverwrittenWALFrameRefusedByAnotherProcess(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "overwritten.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	for i := range holeKeys {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
	}
	require.NotZero(t, overwriteFirstPage(t, path+"-wal"), "the first page is in the WAL")
	walBefore, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)

	out := runChildren(t, 1, "walhole-open", path)[0]
	assert.Contains(t, out, "open failed io=true ")
	assert.Contains(t, out, "lost frames its index counts as committed, from frame")
	walAfter, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	assert.Equal(t, walBefore, walAfter, "the WAL was left as it was")
}

// overwriteFirstPage overwrites the start of the page in every frame of
// the WAL at name that holds the database's first page, and returns how
// many it overwrote. The pages are 4096 bytes.
func overwriteFirstPage(t *testing.T, name string) int {
	t.Helper()
	const frame = 24 + 4096
	wal, err := os.OpenFile(name, os.O_RDWR, 0)
	require.NoError(t, err)
	defer wal.Close()
	st, err := wal.Stat()
	require.NoError(t, err)
	n := 0
	hdr := make([]byte, 4)
	for off := int64(32); off+frame <= st.Size(); off += frame {
		_, err := wal.ReadAt(hdr, off)
		require.NoError(t, err)
		if hdr[0] == 0 && hdr[1] == 0 && hdr[2] == 0 && hdr[3] == 1 {
			_, err = wal.WriteAt(bytes.Repeat([]byte{0xa5}, 100), off+24)
			require.NoError(t, err)
			n++
		}
	}
	return n
}

// walSize returns the size of the WAL beside path.
func walSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	return st.Size()
}

// TestReadThroughAnotherHandlesHoleIsAnIOError: a handle opened before
// another's failed sync dropped its commits reads through the frames the
// shared index still counts (nobody marked it for rebuilding: keepIndex). SQLite reads the zeros as a damaged file
// ("database disk image is malformed", or "not a database" for the first
// page), but the file is sound up to the hole, and the next lone Open
// recovers it: the verb must say ErrIO, naming the lost frames and what to
// do, not ErrCorrupt, from a verb and from Update alike. (With several
// processes on such a disk, every handle beside the failed one said the
// file was corrupt: statesim -seed 9600005 -dropfailedsyncs -syncerror 0.02.)
func TestReadThroughAnotherHandlesHoleIsAnIOError(t *testing.T) {
	for _, grow := range []bool{false, true} {
		for _, inUpdate := range []bool{false, true} {
			t.Run(fmt.Sprintf("first page in the hole=%v/in Update=%v", grow, inUpdate), func(t *testing.T) {
				readThroughAnotherHandlesHole(t, grow, inUpdate)
			})
		}
	}
}

func readThroughAnotherHandlesHole(t *testing.T, grow, inUpdate bool) {
	ctx := context.Background()
	m := faults.NewMemFS(1)
	m.SetDropFailedSyncs(true)
	clock := newClock()
	open := func(pid int) (*state.DB, error) {
		return state.Open("/sim/beside.state", state.WithFS(m.Process(pid)), state.WithClock(clock), state.WithoutBackground(), keepIndex)
	}
	db, err := open(1)
	require.NoError(t, err)
	for i := range holeKeys {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
	}
	require.NoError(t, db.Close()) // the keys go into the file, and the WAL starts over
	db, err = open(1)
	require.NoError(t, err)
	other, err := open(2) // before the hole: no Open check can see it
	require.NoError(t, err)
	_, err = db.Lease(ctx, "durable", "a", time.Minute)
	require.NoError(t, err)
	// As dropHole: new keys grow the file, so its first page is among the
	// pages the failed sync drops; else k00..k19 are overwritten.
	from, to := 0, holeKeys/2
	if grow {
		from, to = holeKeys, 2*holeKeys
	}
	for i := from; i < to; i++ {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("w", 300)))
	}
	m.FailAt(faults.OpSync, 1)
	_, err = db.Lease(ctx, "job", "a", time.Minute)
	require.ErrorIs(t, err, state.ErrIO)

	key := fmt.Sprintf("k%02d", to-1)
	read := func(db *state.DB) error {
		_, err := db.Get(ctx, key)
		return err
	}
	if inUpdate { // the read inside the callback, which returns its error
		read = func(db *state.DB) error {
			return db.Update(ctx, func(tx *state.Tx) error {
				_, err := tx.Get(key)
				return err
			})
		}
	}
	err = read(other)
	require.ErrorIs(t, err, state.ErrIO, "a read through the hole")
	assert.NotErrorIs(t, err, state.ErrCorrupt)
	assert.Contains(t, err.Error(), "lost frames its index counts as committed")
	_, err = other.Get(ctx, "k00")
	require.ErrorIs(t, err, state.ErrIO, "the handle has ended")
	_ = other.Close()
	_ = db.Close()
	requireReopens(t, m, open)
}

// TestFailedSyncMarksTheIndexOnlyWhenWritesWereLost: a failed sync of the
// WAL marks the shared index for rebuilding only when the WAL reads back
// less than the index counts. On a file system that keeps a failed sync's
// writes readable (ext4) nothing was lost to the handles still open, and a
// rebuild of the index in every process would only cost them; on one that
// drops them (XFS) the header is marked (isInit 0) before anyone reads it
// again.
func TestFailedSyncMarksTheIndexOnlyWhenWritesWereLost(t *testing.T) {
	for _, drop := range []bool{false, true} {
		t.Run(fmt.Sprintf("drop=%v", drop), func(t *testing.T) {
			ctx := t.Context()
			m := faults.NewMemFS(1)
			m.SetDropFailedSyncs(drop)
			clock := newClock()
			const path = "/sim/mark.state"
			open := func(pid int) *state.DB {
				db, err := state.Open(path, state.WithFS(m.Process(pid)), state.WithClock(clock), state.WithoutBackground())
				require.NoError(t, err)
				return db
			}
			db, other := open(1), open(2)
			defer other.Close()
			defer db.Close()
			_, err := db.Lease(ctx, "durable", "a", time.Minute)
			require.NoError(t, err)
			for i := range holeKeys {
				require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("w", 300)))
			}
			m.FailAt(faults.OpSync, 1)
			_, err = db.Lease(ctx, "job", "a", time.Minute)
			require.ErrorIs(t, err, state.ErrIO)

			header := make([]byte, 48)
			require.True(t, vfs.SharedIndex(m.Process(9), path, header), "the other handle holds the index")
			const isInit = 12
			if drop {
				assert.Zero(t, header[isInit], "the frames the sync took back: the index is marked for rebuilding")
			} else {
				assert.NotZero(t, header[isInit], "nothing was lost: the index is left as it is")
			}
			for i := range holeKeys {
				v, err := other.Get(ctx, fmt.Sprintf("k%02d", i))
				if drop {
					require.ErrorIs(t, err, state.ErrNotFound, "k%02d was not durable", i)
					continue
				}
				require.NoError(t, err)
				require.Equal(t, strings.Repeat("w", 300), v.String())
			}
		})
	}
}
