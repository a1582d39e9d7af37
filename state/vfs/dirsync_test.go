package vfs_test

import (
	"database/sql"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/state/vfs"
)

// dirSyncs is vfs.OS() with a record of the directory syncs asked of it.
type dirSyncs struct {
	vfs.FS
	mu    sync.Mutex
	names []string
}

func (d *dirSyncs) SyncDir(name string) error {
	d.mu.Lock()
	d.names = append(d.names, name)
	d.mu.Unlock()
	return d.FS.(vfs.DirSyncer).SyncDir(name)
}

func (d *dirSyncs) synced() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.names)
}

// A file's fsync does not make its directory entry durable (fsync(2)):
// SQLite's unix VFS syncs the directory at the first sync of a WAL or
// journal it created, and so must the Go VFS, or a power loss can take a
// synced WAL away with every commit in it.
func TestFirstSyncOfACreatedWALSyncsItsDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.db")
	fsys := &dirSyncs{FS: vfs.OS()}
	db := openVia(t, fsys, path)
	_, err := db.Exec(`PRAGMA synchronous=FULL; CREATE TABLE t(n INTEGER)`)
	require.NoError(t, err)
	for n := range 3 {
		_, err := db.Exec(`INSERT INTO t VALUES (?)`, n)
		require.NoError(t, err)
	}
	got := fsys.synced()
	wal := slices.DeleteFunc(slices.Clone(got), func(n string) bool { return n != path+"-wal" })
	assert.Len(t, wal, 1, "the WAL's directory is synced once, at its first sync: %v", got)
}

// A deletion SQLite asks to be durable (a rollback journal's, with
// synchronous=EXTRA) syncs the directory after it.
func TestDurableDeleteSyncsItsDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.db")
	fsys := &dirSyncs{FS: vfs.OS()}
	name, unregister, err := vfs.Register(fsys)
	require.NoError(t, err)
	defer unregister()
	db, err := sql.Open("sqlite", "file:"+path+"?vfs="+name+"&_pragma=journal_mode(DELETE)&_pragma=synchronous(EXTRA)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE t(n INTEGER)`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO t VALUES (1)`)
	require.NoError(t, err)
	got := fsys.synced()
	assert.Contains(t, got, path+"-journal")
	assert.GreaterOrEqual(t, len(got), 2, "at the journal's first sync and after its deletion: %v", got)
}

// SyncDir on the host's files syncs the directory; one it cannot open is
// left alone, as SQLite's unix VFS leaves it.
func TestOSSyncDir(t *testing.T) {
	ds, ok := vfs.OS().(vfs.DirSyncer)
	require.True(t, ok, "vfs.OS() syncs directories")
	assert.NoError(t, ds.SyncDir(filepath.Join(t.TempDir(), "test.db")))
	assert.NoError(t, ds.SyncDir(filepath.Join(t.TempDir(), "missing", "test.db")))
}
