package state

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLostWritesFindsAPageTakenBackFromTheFile: the loss check compares
// every page a checkpoint copied into the database file (up to the index's
// backfill mark) with its frame in the WAL. After a checkpoint that copied
// the whole WAL it finds nothing; once one of those pages reads back
// otherwise (here overwritten by hand, where a file system that drops a
// failed sync's writes would revert it), it finds the loss, and so it does
// for a frame of the WAL that reads back otherwise.
func TestLostWritesFindsAPageTakenBackFromTheFile(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	fsys := m.Process(1)
	const path = "/sim/lost.state"
	db, err := Open(path, WithFS(fsys), WithClock(faults.NewClock(time.UnixMilli(1_700_000_000_000))), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	for i := range 40 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
	}
	db.lock()
	defer db.unlock()
	var busy, frames, copied int64
	require.NoError(t, db.conn.QueryRowContext(ctx, checkpointSQL).Scan(&busy, &frames, &copied))
	require.Positive(t, copied)
	require.Equal(t, frames, copied, "the whole WAL is in the file")

	lost := func() bool {
		var found bool
		require.NoError(t, db.conn.Raw(func(dc any) error {
			v, region := indexRegion(dc)
			require.NotNil(t, v, "the connection has the index mapped")
			defer v.close()
			found = db.lostWrites(region)
			return nil
		}))
		return found
	}
	assert.False(t, lost(), "every copied page is in the file")

	overwrite := func(name string, off int64, n int) []byte {
		f, err := openForRewrite(fsys, name)
		require.NoError(t, err)
		defer f.Close()
		was := make([]byte, n)
		_, err = f.ReadAt(was, off)
		require.NoError(t, err)
		_, err = f.WriteAt(bytes.Repeat([]byte{0xa5}, n), off)
		require.NoError(t, err)
		return was
	}
	restore := func(name string, off int64, was []byte) {
		f, err := openForRewrite(fsys, name)
		require.NoError(t, err)
		defer f.Close()
		_, err = f.WriteAt(was, off)
		require.NoError(t, err)
	}
	pages, size, err := walPages(fsys, path+walSuffix)
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	page := int64(pages[len(pages)-1]) // one the WAL names, copied into the file
	pageSize := int64(size)
	was := overwrite(path, (page-1)*pageSize+100, 200)
	assert.True(t, lost(), "a copied page reads back otherwise")
	restore(path, (page-1)*pageSize+100, was)
	assert.False(t, lost(), "the page is back")

	was = overwrite(path+walSuffix, walHeaderBytes+walFrameHeaderBytes+100, 200)
	assert.True(t, lost(), "a frame the index counts breaks the checksum chain")
	restore(path+walSuffix, walHeaderBytes+walFrameHeaderBytes+100, was)
	assert.False(t, lost())
}

// TestReadThroughPagesTakenBackIsAnIOError: a transaction under way when
// another handle found a loss and marked the index reads on with the index
// it began with, through pages of the database file the failed sync took
// back; SQLite reads them as damage. While the index is marked (nobody has
// rebuilt it yet) that is an ErrIO naming what happened, not ErrCorrupt:
// the file is sound, and reopening it rebuilds the index. (The pages are
// overwritten by hand here, where a file system that drops a failed sync's
// writes would revert them.)
func TestReadThroughPagesTakenBackIsAnIOError(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	clock := faults.NewClock(time.UnixMilli(1_700_000_000_000))
	const path = "/sim/taken.state"
	open := func(pid int) *DB {
		db, err := Open(path, WithFS(m.Process(pid)), WithClock(clock), WithoutBackground())
		require.NoError(t, err)
		return db
	}
	db, other := open(1), open(2)
	defer other.Close()
	defer db.Close()
	for i := range 40 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
	}
	var busy, frames, copied int64
	require.NoError(t, db.conn.QueryRowContext(ctx, checkpointSQL).Scan(&busy, &frames, &copied))
	require.Equal(t, frames, copied, "the whole WAL is in the file")
	pages, size, err := walPages(m.Process(1), path+walSuffix)
	require.NoError(t, err)

	err = other.Update(ctx, func(tx *Tx) error {
		f, err := openForRewrite(m.Process(1), path)
		require.NoError(t, err)
		for _, p := range pages {
			if p > 1 { // the first page was read as the transaction began
				_, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, size), int64(p-1)*int64(size))
				require.NoError(t, err)
			}
		}
		require.NoError(t, f.Close())
		require.NoError(t, db.conn.Raw(func(dc any) error {
			v, region := indexRegion(dc)
			require.NotNil(t, v)
			defer v.close()
			markUninitialised(region)
			return nil
		}))
		_, err = tx.Get("k39")
		return err
	})
	require.ErrorIs(t, err, ErrIO, "a read through pages taken back")
	assert.NotErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "writes the file system took back")
}

// TestLostWritesLeavesAPageWhoseLastFrameIsPastTheMark: a checkpoint that a
// reader's older snapshot stops short copies no page whose last frame lies
// past where it stops, and still moves the backfill mark there, so a page
// of the database file may be older than its last frame under the mark:
// readers take that page from its later frame in the WAL. The loss check
// compares only pages with no frame past the mark; counting the others
// found a loss on a file system that lost nothing, and every connection of
// every process rebuilt the index for it.
func TestLostWritesLeavesAPageWhoseLastFrameIsPastTheMark(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	const path = "/sim/mark.state"
	db, err := Open(path, WithFS(m.Process(1)), WithClock(faults.NewClock(time.UnixMilli(1_700_000_000_000))), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	checkpoint := func() (frames, copied int64) {
		var busy int64
		require.NoError(t, db.conn.QueryRowContext(ctx, checkpointSQL).Scan(&busy, &frames, &copied))
		return frames, copied
	}
	lost := func() bool {
		var found bool
		require.NoError(t, db.conn.Raw(func(dc any) error {
			v, region := indexRegion(dc)
			require.NotNil(t, v, "the connection has the index mapped")
			defer v.close()
			found = db.lostWrites(region)
			return nil
		}))
		return found
	}

	require.NoError(t, db.Set(ctx, "k", "v0"))
	frames, copied := checkpoint()
	require.Equal(t, frames, copied, "the file holds v0")
	require.NoError(t, db.Set(ctx, "k", "v1"))

	sqldb, reader, err := openWALConn(ctx, db.dsn)
	require.NoError(t, err)
	defer sqldb.Close()
	defer reader.Close()
	_, err = reader.ExecContext(ctx, `BEGIN`)
	require.NoError(t, err)
	var n int
	require.NoError(t, reader.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&n))

	require.NoError(t, db.Set(ctx, "k", "v2"))
	frames, copied = checkpoint()
	require.Positive(t, copied)
	require.Less(t, copied, frames, "the reader's snapshot stopped the checkpoint short")
	assert.False(t, lost(), "pages left for their later frames are not a loss")

	_, err = reader.ExecContext(ctx, `COMMIT`)
	require.NoError(t, err)
	frames, copied = checkpoint()
	require.Equal(t, frames, copied, "the whole WAL is in the file")
	assert.False(t, lost())
	got, err := db.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "v2", string(got.Bytes()))
}

// readHookFS calls onRead before each read of a file it opened.
type readHookFS struct {
	vfs.FS
	onRead func(name string, off int64)
}

func (h readHookFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	f, err := h.FS.Open(name, flags)
	if err != nil {
		return nil, err
	}
	return readHookFile{File: f, name: name, onRead: h.onRead}, nil
}

type readHookFile struct {
	vfs.File
	name   string
	onRead func(name string, off int64)
}

func (f readHookFile) ReadAt(p []byte, off int64) (int, error) {
	f.onRead(f.name, off)
	return f.File.ReadAt(p, off)
}

// TestLostWritesLooksAgainWhenTheIndexMovedOn: the loss check runs
// without the write lock (after a background checkpoint's failed sync,
// say), so another process may commit while it reads. Here one starts the
// WAL over (new salts) between the check's read of the index header and
// its read of the WAL's: the WAL no longer matches the header the check
// read, which on its own looks like a loss on a disk that lost nothing.
// The check reads the header again after it looked, and when it moved on,
// looks again.
func TestLostWritesLooksAgainWhenTheIndexMovedOn(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	clock := faults.NewClock(time.UnixMilli(1_700_000_000_000))
	const path = "/sim/moved.state"
	open := func(pid int) *DB {
		db, err := Open(path, WithFS(m.Process(pid)), WithClock(clock), WithoutBackground())
		require.NoError(t, err)
		return db
	}
	db, other := open(1), open(2)
	defer other.Close()
	defer db.Close()
	for i := range 20 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 300)))
	}
	db.lock()
	defer db.unlock()
	var busy, frames, copied int64
	require.NoError(t, db.conn.QueryRowContext(ctx, checkpointSQL).Scan(&busy, &frames, &copied))
	require.Equal(t, frames, copied, "the whole WAL is in the file: the next commit starts it over")

	restarted := false
	plain := db.cfg.fs
	db.cfg.fs = readHookFS{FS: plain, onRead: func(name string, off int64) {
		if name == path+walSuffix && off == 0 && !restarted {
			restarted = true
			require.NoError(t, other.Set(ctx, "moved", "on"))
		}
	}}
	defer func() { db.cfg.fs = plain }()
	var found bool
	require.NoError(t, db.conn.Raw(func(dc any) error {
		v, region := indexRegion(dc)
		require.NotNil(t, v, "the connection has the index mapped")
		defer v.close()
		found = db.lostWrites(region)
		return nil
	}))
	require.True(t, restarted, "the other process committed while the check read")
	assert.False(t, found, "a WAL started over while the check read is no loss")
}
