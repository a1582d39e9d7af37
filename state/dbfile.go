package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
)

// One descriptor of the database file per process. Closing any descriptor
// of a file drops every POSIX lock the process holds on it, SQLite's
// included. SQLite's own connections in one process share one table of
// locks per file and keep their descriptors open while any lock is held;
// a descriptor opened outside SQLite is not in that table. The engine needs
// one on the native VFS: Open reads the file's header before SQLite opens
// it (prepareFile), and the checkpointer syncs the file apart from SQLite
// (checkpointsync.go), and the WAL repair rewrites pages of it
// (walrepair.go). So the handles of one process on one file share one
// descriptor, read-only handles included (their connections hold locks
// too), opened by the first handle's Open and closed once the last of them
// has closed its connections (releaseHandle). A handle opened and
// closed beside another used to drop the other's locks: another program
// could then take the file's exclusive lock under it, and a connection in
// exclusive locking mode wrote the file and deleted its WAL while the
// first handle was using it (TestSecondHandleKeepsTheLocks).
//
// Not covered: a connection to the same file that the process opened
// without statekit (its own database/sql pool, say) loses its locks when
// the last statekit handle on the file closes this descriptor, as it would
// when any other descriptor of the file is closed.

// dbFile is the process's descriptor of one database file.
type dbFile struct {
	f    *os.File
	rw   *os.File    // the same file open to write, once a handle asked (writable); closed with f
	info fs.FileInfo // the file it was opened on, to find it again through any path
	refs int         // handles holding it; guarded by dbFiles.mu
}

// dbFiles are the database files handles of this process hold open.
var dbFiles struct {
	mu    sync.Mutex
	files []*dbFile
}

// acquireDBFile returns the process's descriptor of the file at path, one
// more reference to it, opening it with open when no handle of the process
// holds the file (by identity, whatever the path). Release it with
// release.
func acquireDBFile(path string, open func() (*os.File, error)) (*dbFile, error) {
	dbFiles.mu.Lock()
	defer dbFiles.mu.Unlock()
	if fi, err := os.Stat(path); err == nil {
		for _, d := range dbFiles.files {
			if os.SameFile(fi, d.info) {
				d.refs++
				return d, nil
			}
		}
	}
	f, err := open()
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		// No handle of the process holds this file: closing drops no
		// lock of theirs.
		_ = f.Close()
		return nil, err
	}
	d := &dbFile{f: f, info: fi, refs: 1}
	dbFiles.files = append(dbFiles.files, d)
	return d, nil
}

// release drops one reference to d and closes the descriptor with the
// last. Callers release only after their connections to the file closed.
func (d *dbFile) release() error {
	dbFiles.mu.Lock()
	defer dbFiles.mu.Unlock()
	d.refs--
	if d.refs > 0 {
		return nil
	}
	dbFiles.files = slices.DeleteFunc(dbFiles.files, func(o *dbFile) bool { return o == d })
	var err error
	if d.rw != nil {
		err = d.rw.Close()
	}
	return errors.Join(err, d.f.Close())
}

// writable returns a descriptor of the file open to read and write, for
// the WAL repair's rewrite of its pages: opened through path at the first
// call and kept, as f is, until the last handle releases the file, since
// closing it would drop the process's locks. It is an error if path no
// longer names the file the handles hold.
func (d *dbFile) writable(path string) (*os.File, error) {
	dbFiles.mu.Lock()
	defer dbFiles.mu.Unlock()
	if d.rw != nil {
		return d.rw, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !os.SameFile(fi, d.info) {
		err = fmt.Errorf("%s is no longer the file this process opened", path)
	}
	if err != nil {
		// Not the file the handles hold (or it cannot tell): closing
		// this descriptor drops no lock of theirs.
		return nil, errors.Join(err, f.Close())
	}
	d.rw = f
	return f, nil
}

// sharedSyncer syncs the database file through the process's descriptor
// of it, which it does not own: Close leaves it open.
type sharedSyncer struct{ f *os.File }

func (s sharedSyncer) Sync() error  { return datasync(s.f) }
func (s sharedSyncer) Close() error { return nil }
