package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/statekit/statekit/state/vfs"
)

// fileSyncer syncs a file apart from SQLite, through a descriptor of the
// engine's own: the database file for the background checkpointer (here),
// the WAL for a grant that must be durable (walsync.go). A sync of any
// descriptor of a file makes every write to it so far durable, whoever
// wrote it, and needs none of SQLite's locks.
//
// Why the checkpointer syncs the database file itself: a passive
// checkpoint syncs it only in the pass that copies the whole WAL, and
// passes that ran beside commits leave the pages they copied in the
// operating system's cache for that last pass, which runs under the
// handle's lock, to write back. At ten million keys that was 13
// to 26 MB of scattered pages, a last pass of 300-370 ms with every verb
// waiting; syncing after each pass without the lock leaves it only what
// was copied since.
type fileSyncer interface {
	Sync() error
	Close() error
}

// osSyncer is a file opened from the operating system, synced
// with fdatasync where there is one, as SQLite syncs it.
type osSyncer struct{ f *os.File }

func (s osSyncer) Sync() error  { return datasync(s.f) }
func (s osSyncer) Close() error { return s.f.Close() }

// openSyncer opens the file at path+suffix, of the kind given (vfs.OpenMainDB
// or vfs.OpenWAL), to sync it: through fsys when the handle runs on one
// (WithFS), else from the operating system, beside the database's real
// path, as SQLite names its files.
func openSyncer(fsys vfs.FS, path, suffix string, kind vfs.OpenFlag) (fileSyncer, error) {
	if fsys != nil {
		f, err := fsys.Open(path+suffix, vfs.OpenReadOnly|kind)
		if err != nil {
			return nil, err
		}
		return yielding(fsys, f), nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(real + suffix)
	if err != nil {
		return nil, err
	}
	return osSyncer{f}, nil
}

// syncDB syncs the database file after a checkpoint pass. A failure is an
// I/O error that ends the handle: the pages the pass copied may never
// reach the disk (a failed sync is not retried as if nothing happened),
// and the WAL must not start over behind them.
func (c *checkpointer) syncDB(db *DB) error {
	if c.file == nil {
		return nil
	}
	if err := c.file.Sync(); err != nil {
		return &causeError{
			msg:  fmt.Sprintf("%v: checkpoint: sync %s: %v", ErrIO, db.path, err),
			errs: []error{ErrIO, err},
		}
	}
	return nil
}

// closeFile closes the file syncDB syncs, if open.
func (c *checkpointer) closeFile() error {
	if c.file == nil {
		return nil
	}
	err := c.file.Close()
	c.file = nil
	if errors.Is(err, fs.ErrClosed) {
		err = nil
	}
	return err
}
