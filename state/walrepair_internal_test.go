package state

import (
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

	require.NoError(t, rewriteFile(nil, link+walSuffix))

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
	require.NoError(t, rewriteFile(nil, link+walSuffix))
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
