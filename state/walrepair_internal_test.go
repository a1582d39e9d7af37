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

// TestNativeRepairLeavesPagesBehindAnOldSnapshot: a reader that keeps an
// older snapshot stops every checkpoint short of the WAL's end, so Open's
// page repair cannot run; it tries until the busy timeout, then Open goes
// on without it (what is not promised), and every key stays readable. Once
// the reader is gone, the next Open repairs.
func TestNativeRepairLeavesPagesBehindAnOldSnapshot(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "app.state")
	a, err := Open(path, WithoutBackground())
	require.NoError(t, err)
	defer a.Close()
	require.NoError(t, a.Set(ctx, "before", 1))

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

	const budget = 100 * time.Millisecond
	began := time.Now()
	b, err := Open(path, WithBusyTimeout(budget))
	took := time.Since(began)
	require.NoError(t, err, "Open goes on without the page repair")
	assert.GreaterOrEqual(t, took, budget, "the repair tried for the busy timeout")
	assert.Less(t, took, time.Minute, "and then stopped")
	v, err := b.Get(ctx, "k19")
	require.NoError(t, err)
	assert.Equal(t, "19", v.String())
	require.NoError(t, b.Close())

	_, err = reader.ExecContext(ctx, `COMMIT`)
	require.NoError(t, err)
	require.NoError(t, reader.Close())
	var busy, frames, copied int64
	require.NoError(t, a.conn.QueryRowContext(ctx, checkpointSQL).Scan(&busy, &frames, &copied))
	require.Equal(t, frames, copied, "the whole WAL is in the file: the next checkpoint writes nothing")
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	require.NoError(t, os.Chtimes(path, old, old))
	c, err := Open(path)
	require.NoError(t, err)
	defer c.Close()
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.True(t, st.ModTime().After(old), "with the reader gone, Open repaired")
}
