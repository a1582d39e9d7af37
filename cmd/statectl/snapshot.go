package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/statekit/statekit/state"
)

// Reading a file in a directory the user cannot write, or on a full disk.
// SQLite reads a WAL file only beside its -wal and -shm files, which it
// must create (and the -shm grow) when they are missing. When path has no
// -wal file, no process has it open (the last to close removes it) and
// every commit is in the file itself; so too when its -wal is empty and no
// process holds the -shm's lock (an Open that failed on a full disk leaves
// them so). Then a copy in a private directory, made while the file stood
// still, reads exactly as the file would. The file is read twice, into the
// copy and again; if the two differ a writer came meanwhile, and the read
// is refused rather than served from a mixed copy.

// snapshots holds the private directory of each DB opened on a copy, for
// closeDB to remove.
var snapshots = map[*state.DB]string{}

// errNoSnapshot says a copy cannot stand in for the file: it has a WAL.
var errNoSnapshot = errors.New("the file has a WAL")

// openSnapshot opens a private copy of path read-only. It returns
// errNoSnapshot when path has a -wal file that is not empty or that a
// process may be using, and an error naming the cause when the copy cannot
// be made or the file changed while it was copied.
func openSnapshot(path string) (*state.DB, error) {
	if _, err := os.Lstat(path + "-wal"); !errors.Is(err, fs.ErrNotExist) && !unusedEmptyWAL(path) {
		return nil, errNoSnapshot
	}
	dir, err := os.MkdirTemp("", "statectl-")
	if err != nil {
		return nil, fmt.Errorf("%s: a private copy to read: %w", path, err)
	}
	cp := filepath.Join(dir, filepath.Base(path))
	db, err := copyAndOpen(path, cp)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	snapshots[db] = dir
	return db, nil
}

// copyAndOpen copies path to cp, checks path did not change meanwhile, and
// opens cp read-only.
func copyAndOpen(path, cp string) (*state.DB, error) {
	copied, err := hashFile(path, cp)
	if err != nil {
		return nil, fmt.Errorf("%s: a private copy to read: %w", path, err)
	}
	again, err := hashFile(path, "")
	if err != nil {
		return nil, fmt.Errorf("%s: a private copy to read: %w", path, err)
	}
	if copied != again {
		return nil, fmt.Errorf("%s: it changed while statectl copied it to read (its directory is not writable, so SQLite cannot read it in place); try again", path)
	}
	return state.Open(cp, state.WithReadOnly(), state.WithoutBackground())
}

// hashFile returns the SHA-256 of the file at path, copying it to a new
// file cp (mode 0600) on the way unless cp is empty.
func hashFile(path, cp string) (sum [sha256.Size]byte, err error) {
	src, err := os.Open(path)
	if err != nil {
		return sum, err
	}
	defer src.Close()
	h := sha256.New()
	var w io.Writer = h
	if cp != "" {
		dst, err := os.OpenFile(cp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return sum, err
		}
		defer func() {
			if cerr := dst.Close(); err == nil {
				err = cerr
			}
		}()
		w = io.MultiWriter(h, dst)
	}
	if _, err := io.Copy(w, src); err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// removeSnapshot removes the private copy db was opened on, if any.
func removeSnapshot(db *state.DB) {
	if dir, ok := snapshots[db]; ok {
		delete(snapshots, db)
		os.RemoveAll(dir)
	}
}
