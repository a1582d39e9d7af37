package state

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sqlite3 "modernc.org/sqlite/lib"
)

// TestRewriteFileFindsTheWALBehindASymlink: SQLite's unix VFS names the WAL
// after the database file's real path, so a handle opened through a
// symbolic link must rewrite the WAL beside the real file. A WAL it failed
// to find would be skipped as missing: the test sees the real WAL
// rewritten (its modification time moves) with its bytes unchanged.
func TestRewriteFileFindsTheWALBehindASymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real", "app.state")
	require.NoError(t, os.Mkdir(filepath.Dir(real), 0o755))
	link := filepath.Join(dir, "link.state")
	require.NoError(t, os.Symlink(real, link))
	require.NoError(t, os.WriteFile(real, []byte("db"), 0o600))
	wal := []byte("frames that must reach the disk")
	require.NoError(t, os.WriteFile(real+walSuffix, wal, 0o600))
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	require.NoError(t, os.Chtimes(real+walSuffix, old, old))

	require.NoError(t, rewriteFile(nil, link+walSuffix, true))

	st, err := os.Stat(real + walSuffix)
	require.NoError(t, err)
	assert.True(t, st.ModTime().After(old), "the WAL beside the real file was rewritten")
	got, err := os.ReadFile(real + walSuffix)
	require.NoError(t, err)
	assert.Equal(t, wal, got)
	_, err = os.Lstat(link + walSuffix)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing is created beside the link")

	// A missing WAL is left missing.
	require.NoError(t, os.Remove(real+walSuffix))
	require.NoError(t, rewriteFile(nil, link+walSuffix, true))
	_, err = os.Stat(real + walSuffix)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestSQLiteNamesTheWALAfterTheRealPath pins what rewriteFile assumes of
// the native VFS: a file opened through a symbolic link has its WAL beside
// the real file.
func TestSQLiteNamesTheWALAfterTheRealPath(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real", "app.state")
	require.NoError(t, os.Mkdir(filepath.Dir(real), 0o755))
	link := filepath.Join(dir, "link.state")
	db, err := Open(real, WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.NoError(t, os.Symlink(real, link))

	db, err = Open(link, WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set(t.Context(), "k", "v"))
	_, err = os.Stat(real + walSuffix)
	require.NoError(t, err, "the WAL is beside the real file")
	_, err = os.Lstat(link + walSuffix)
	assert.ErrorIs(t, err, os.ErrNotExist, "not beside the link")
}

// TestNativeRepairRewritesThePages: on the native VFS too, Open's repair
// rewrites the pages of the database file that the WAL names, through the
// process's descriptor of the file (closing one of its own would drop the
// locks of every handle of the process: TestSecondHandleKeepsTheLocks).
// The WAL is copied into the file first, so the repair's checkpoint has
// nothing to write: the file's modification time moves only if the
// repair wrote the pages, and their bytes stay as they were.
func TestNativeRepairRewritesThePages(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "app.state")
	a, err := Open(path, WithoutBackground())
	require.NoError(t, err)
	defer a.Close()
	for i := range 20 {
		require.NoError(t, a.Set(ctx, fmt.Sprintf("k%d", i), i))
	}
	var busy, frames, copied int64
	require.NoError(t, a.conn.QueryRowContext(ctx, checkpointSQL).Scan(&busy, &frames, &copied))
	require.Positive(t, frames)
	require.Equal(t, frames, copied, "the whole WAL is in the file")
	pages, _, err := walPages(nil, path+walSuffix)
	require.NoError(t, err)
	require.NotEmpty(t, pages, "the WAL still names the pages")
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	require.NoError(t, os.Chtimes(path, old, old))

	b, err := Open(path)
	require.NoError(t, err)
	defer b.Close()
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.True(t, st.ModTime().After(old), "Open rewrote the pages the WAL names")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after)
	assert.Same(t, a.file, b.file, "both handles use the process's descriptor")
	for i := range 20 {
		v, err := b.Get(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(i), v.String())
	}
}

// TestNativeRepairRewritesPagesBehindAnOldSnapshot: a reader that keeps an
// older snapshot stops every checkpoint short of the WAL's end, so Open's
// page repair cannot wait for one that copies the whole WAL; on the native
// VFS too it takes the checkpointer's lock of the shared index and rewrites
// the pages of the frames up to the backfill mark. The frames up to the
// reader's snapshot are copied into the file first, so the checkpoint at
// Open has nothing to write: the file's modification time moves only if
// the repair wrote the pages, and their bytes stay as they were.
func TestNativeRepairRewritesPagesBehindAnOldSnapshot(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "app.state")
	a, err := Open(path, WithoutBackground())
	require.NoError(t, err)
	defer a.Close()
	for i := range 20 {
		require.NoError(t, a.Set(ctx, fmt.Sprintf("before%d", i), i))
	}

	raw, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer raw.Close()
	reader, err := raw.Conn(ctx)
	require.NoError(t, err)
	defer reader.Close()
	_, err = reader.ExecContext(ctx, `BEGIN`)
	require.NoError(t, err)
	var n int
	require.NoError(t, reader.QueryRowContext(ctx, `SELECT count(*) FROM kv`).Scan(&n))
	for i := range 20 {
		require.NoError(t, a.Set(ctx, fmt.Sprintf("k%d", i), i))
	}
	var busy, frames, copied int64
	require.NoError(t, a.conn.QueryRowContext(ctx, checkpointSQL).Scan(&busy, &frames, &copied))
	require.Positive(t, copied, "the frames up to the reader's snapshot are in the file")
	require.Less(t, copied, frames, "and no more")
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	require.NoError(t, os.Chtimes(path, old, old))

	b, err := Open(path, WithBusyTimeout(2*time.Second))
	require.NoError(t, err)
	defer b.Close()
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.True(t, st.ModTime().After(old), "Open rewrote the pages behind the reader")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after)
	for i := range 20 {
		v, err := b.Get(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(i), v.String())
	}
	var still int
	require.NoError(t, reader.QueryRowContext(ctx, `SELECT count(*) FROM kv`).Scan(&still))
	assert.Equal(t, n, still, "the reader kept its snapshot throughout")
	_, err = reader.ExecContext(ctx, `COMMIT`)
	require.NoError(t, err)
}

// TestNativeRepairLeavesPagesWhileACheckpointHoldsItsLock: the page repair
// needs the checkpointer's lock; while another process holds it (a process
// stopped in the middle of a checkpoint), Open tries until its busy
// timeout, then goes on without the repair (what is not promised) and
// every key stays readable: the file is not written.
func TestNativeRepairLeavesPagesWhileACheckpointHoldsItsLock(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "app.state")
	a, err := Open(path, WithoutBackground())
	require.NoError(t, err)
	defer a.Close()
	for i := range 20 {
		require.NoError(t, a.Set(ctx, fmt.Sprintf("k%d", i), i))
	}
	var busy, frames, copied int64
	require.NoError(t, a.conn.QueryRowContext(ctx, checkpointSQL).Scan(&busy, &frames, &copied))
	require.Equal(t, frames, copied, "the whole WAL is in the file")

	raw, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer raw.Close()
	holder, err := raw.Conn(ctx)
	require.NoError(t, err)
	defer holder.Close()
	var n int
	require.NoError(t, holder.QueryRowContext(ctx, `SELECT count(*) FROM kv`).Scan(&n))
	require.NoError(t, holder.Raw(func(dc any) error {
		v, _ := indexRegion(dc)
		require.NotNil(t, v, "the holder has the shared index mapped")
		defer v.close()
		require.EqualValues(t, sqlite3.SQLITE_OK, v.lock(walCkptLock, 1, sqlite3.SQLITE_SHM_LOCK|sqlite3.SQLITE_SHM_EXCLUSIVE))
		return nil
	}))
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	require.NoError(t, os.Chtimes(path, old, old))

	b, err := Open(path, WithBusyTimeout(100*time.Millisecond))
	require.NoError(t, err, "Open goes on without the page repair")
	defer b.Close()
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, old, st.ModTime(), "nothing was written while the lock was held")
	v, err := b.Get(ctx, "k19")
	require.NoError(t, err)
	assert.Equal(t, "19", v.String())
}
