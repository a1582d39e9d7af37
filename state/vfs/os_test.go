package vfs_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/statekit/statekit/state/vfs"
)

// openVia opens path in WAL mode through a new registration of fsys, with
// one connection, and closes and unregisters it at the end of the test.
func openVia(t *testing.T, fsys vfs.FS, path string) *sql.DB {
	t.Helper()
	name, unregister, err := vfs.Register(fsys)
	require.NoError(t, err)
	db, err := sql.Open("sqlite", "file:"+path+"?vfs="+name+
		"&_pragma=journal_mode(WAL)&_pragma=busy_timeout(20000)&_pragma=wal_autocheckpoint(20)")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() {
		assert.NoError(t, db.Close())
		unregister()
	})
	return db
}

// commit inserts one row in a BEGIN IMMEDIATE transaction, through a
// cancellable context so that modernc's busy handler waits for the lock.
func commit(ctx context.Context, db *sql.DB, n int) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO t(n, pad) VALUES(?, zeroblob(500))`, n); err != nil {
		_, _ = conn.ExecContext(ctx, `ROLLBACK`)
		return err
	}
	_, err = conn.ExecContext(ctx, `COMMIT`)
	return err
}

func TestOSConnectionsShareOneFile(t *testing.T) {
	const conns, commits = 4, 50
	path := filepath.Join(t.TempDir(), "test.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dbs := make([]*sql.DB, conns)
	for i := range dbs {
		dbs[i] = openVia(t, vfs.OS(), path)
	}
	_, err := dbs[0].ExecContext(ctx, `CREATE TABLE t(n INTEGER, pad BLOB)`)
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i, db := range dbs {
		wg.Go(func() {
			for c := range commits {
				if err := commit(ctx, db, i*1000+c); err != nil {
					errs <- fmt.Errorf("connection %d commit %d: %w", i, c, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for i, db := range dbs {
		var n int
		require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n))
		assert.Equal(t, conns*commits, n, "connection %d sees every commit", i)
	}
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestOSFilesAreNativeSQLiteFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.db")
	func() {
		name, unregister, err := vfs.Register(vfs.OS())
		require.NoError(t, err)
		defer unregister()
		db, err := sql.Open("sqlite", "file:"+path+"?vfs="+name+"&_pragma=journal_mode(WAL)")
		require.NoError(t, err)
		defer db.Close()
		_, err = db.Exec(`CREATE TABLE t(n INTEGER); INSERT INTO t VALUES (1), (2), (3)`)
		require.NoError(t, err)
	}()

	native, err := sql.Open("sqlite", "file:"+path) // SQLite's own unix VFS
	require.NoError(t, err)
	defer native.Close()
	var sum int
	var check string
	require.NoError(t, native.QueryRow(`SELECT sum(n) FROM t`).Scan(&sum))
	require.NoError(t, native.QueryRow(`PRAGMA integrity_check`).Scan(&check))
	assert.Equal(t, 6, sum)
	assert.Equal(t, "ok", check)
}

func TestOpeningAMissingFileReadOnlyFails(t *testing.T) {
	name, unregister, err := vfs.Register(vfs.OS())
	require.NoError(t, err)
	defer unregister()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "missing.db")+"?mode=ro&vfs="+name)
	require.NoError(t, err)
	defer db.Close()
	err = db.Ping()
	require.Error(t, err)
	assert.Equal(t, sqlite3.SQLITE_CANTOPEN, code(err)&0xff, "%v", err)
}

func TestRegisterRefusesNil(t *testing.T) {
	_, _, err := vfs.Register(nil)
	assert.ErrorIs(t, err, vfs.ErrRegister)
}

func TestUnregisterTwiceIsHarmless(t *testing.T) {
	name, unregister, err := vfs.Register(vfs.OS())
	require.NoError(t, err)
	unregister()
	unregister()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db")+"?vfs="+name)
	require.NoError(t, err)
	defer db.Close()
	assert.Error(t, db.Ping(), "an unregistered VFS is gone")
}

// fullFS is the OS FS whose writes fail with ErrNoSpace while full is set.
type fullFS struct {
	vfs.FS
	full *atomic.Bool
}

func (f fullFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	file, err := f.FS.Open(name, flags)
	if err != nil {
		return nil, err
	}
	return fullFile{File: file, full: f.full}, nil
}

type fullFile struct {
	vfs.File
	full *atomic.Bool
}

func (f fullFile) WriteAt(p []byte, off int64) (int, error) {
	if f.full.Load() {
		return 0, fmt.Errorf("write: %w", vfs.ErrNoSpace)
	}
	return f.File.WriteAt(p, off)
}

func TestNoSpaceReachesSQLiteAsFull(t *testing.T) {
	full := &atomic.Bool{}
	db := openVia(t, fullFS{FS: vfs.OS(), full: full}, filepath.Join(t.TempDir(), "test.db"))
	_, err := db.Exec(`CREATE TABLE t(n INTEGER)`)
	require.NoError(t, err)

	full.Store(true)
	_, err = db.Exec(`INSERT INTO t VALUES (1)`)
	require.Error(t, err)
	assert.Equal(t, sqlite3.SQLITE_FULL, code(err)&0xff, "%v", err)

	full.Store(false)
	_, err = db.Exec(`INSERT INTO t VALUES (2)`)
	require.NoError(t, err, "space is back")
	var ns []int
	rows, err := db.Query(`SELECT n FROM t`)
	require.NoError(t, err)
	for rows.Next() {
		var n int
		require.NoError(t, rows.Scan(&n))
		ns = append(ns, n)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []int{2}, ns, "the failed insert left nothing")
}

// code returns the SQLite result code inside err, or 0.
func code(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

func TestUnregisterWhileOpenWaitsForTheLastClose(t *testing.T) {
	name, unregister, err := vfs.Register(vfs.OS())
	require.NoError(t, err)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db")+"?vfs="+name+"&_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	_, err = db.Exec(`CREATE TABLE t(n INTEGER)`)
	require.NoError(t, err)

	unregister() // too early: the open connection keeps the VFS alive
	_, err = db.Exec(`INSERT INTO t VALUES (1)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
}

// deadFS is the OS FS whose files report themselves dead at once, as a
// simulated process's files do when it crashes while they open.
type deadFS struct{ vfs.FS }

func (d deadFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	f, err := d.FS.Open(name, flags)
	if err != nil {
		return nil, err
	}
	return deadFile{f}, nil
}

type deadFile struct{ vfs.File }

func (deadFile) Dead() bool { return true }

func TestAFileDeadAtOpenTakesNoLock(t *testing.T) {
	name, unregister, err := vfs.Register(deadFS{vfs.OS()})
	require.NoError(t, err)
	defer unregister()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db")+"?vfs="+name)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE t(n INTEGER)`)
	require.Error(t, err)
	assert.Equal(t, sqlite3.SQLITE_IOERR, code(err)&0xff, "%v", err)
}
