package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/statekit/statekit/internal/backend"
	"github.com/statekit/statekit/state"
)

// openRead opens path read-only: a missing file is an error, never created,
// and nothing in the file is changed or advanced. Nothing is created beside
// it either: SQLite reads a WAL file in place only beside its -wal and -shm
// files, creating them when missing (owned by the reader, with the file's
// mode, where they would stop its owner from writing it). So a file with no
// -wal, which no process has open, is read from a private copy
// (snapshot.go); a file with a -wal, which a writer may have open and whose
// latest commits may be there, is read in place, as is one with a rollback
// journal (hasJournal).
func openRead(path string) (*state.DB, error) {
	if isURL(path) {
		return openURL(path)
	}
	if err := regularFile(path); err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		if !hasJournal(path) {
			snap, err := openSnapshot(path)
			switch {
			case errors.Is(err, errChanged) && try < copyTries:
				// A writer came meanwhile: look again, and read in
				// place beside the -wal it made.
				continue
			case errors.Is(err, errNoSnapshot):
				// A -wal is there: a writer may have the file open.
			case err != nil:
				return nil, fileError(path, err)
			default:
				return snap, nil
			}
		}
		return openInPlace(path)
	}
}

// openInPlace opens path read-only where it is, beside its -wal. If SQLite
// cannot create or grow the -shm file there (the directory is not
// writable, the disk is full), it reads a private copy when that is exact.
func openInPlace(path string) (*state.DB, error) {
	db, err := state.Open(path, state.WithReadOnly(), state.WithoutBackground())
	if errors.Is(err, state.ErrReadOnly) || errors.Is(err, state.ErrDiskFull) {
		snap, serr := openSnapshot(path)
		switch {
		case errors.Is(serr, errNoSnapshot) && errors.Is(err, state.ErrDiskFull):
			return nil, fileError(path, err)
		case errors.Is(serr, errNoSnapshot):
			return nil, exit(exitError, "%s", readOnlyOpenMessage(path, err))
		case serr != nil:
			return nil, fileError(path, serr)
		}
		return snap, nil
	}
	if err != nil {
		return nil, fileError(path, err)
	}
	return db, nil
}

// openWrite opens path for writing, creating it when missing. statectl
// starts no background sweeper: sweep is a command of its own.
func openWrite(path string, opts ...state.Option) (*state.DB, error) {
	if isURL(path) {
		return openURL(path, opts...)
	}
	if err := regularFile(path); err != nil {
		return nil, err
	}
	if err := writableFile(path); err != nil {
		return nil, err
	}
	_, statErr := os.Lstat(path)
	missing := errors.Is(statErr, fs.ErrNotExist)
	db, err := state.Open(path, append([]state.Option{state.WithoutBackground()}, opts...)...)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, exit(exitError, "%s: cannot create it: no such directory", shown(path))
	}
	if missing && errors.Is(err, fs.ErrPermission) && !errors.Is(err, state.ErrReadOnly) {
		// The directory's permission, not a file's: there is none.
		return nil, &exitErr{code: exitError, cause: err,
			msg: fmt.Sprintf("%s: cannot create it in %s: permission denied", shown(path), filepath.Dir(path))}
	}
	if errors.Is(err, state.ErrBusy) {
		// SQLite's own words at the open: "database is locked (5)".
		return nil, &exitErr{code: exitError, msg: busyMessage(path), cause: err}
	}
	if err != nil {
		return nil, fileError(path, err)
	}
	return db, nil
}

// withKey opens path read-only and runs read on it for key: the shape of the
// read verbs (get, ttl). An absent or expired key is notFound (exit 1),
// another error names the file.
func withKey(path, key string, read func(*state.DB) error) (err error) {
	db, err := openRead(path)
	if err != nil {
		return err
	}
	defer closeDB(db, path, &err)
	err = read(db)
	if isNotFound(err) {
		return notFound(path, key)
	}
	if err != nil {
		return fileError(path, err)
	}
	return nil
}

// closeDB closes db, and the private copy it read if any, and keeps the
// first error.
func closeDB(db *state.DB, path string, err *error) {
	defer removeSnapshot(db)
	if cerr := db.Close(); cerr != nil && *err == nil {
		*err = fileError(path, cerr)
	}
}

// regularFile refuses a path that exists and is not a regular file
// (after symbolic links): SQLite would report a directory as an I/O error,
// block on a FIFO, and fail on a device with a confusing cause.
func regularFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil // missing, or an error SQLite's open names better
	case fi.IsDir():
		return exit(exitError, "%s: is a directory", shown(path))
	case !fi.Mode().IsRegular():
		return exit(exitError, "%s: not a regular file", shown(path))
	}
	return nil
}

// writableFile refuses a path that exists and that this user may not
// write. SQLite would open it read-only, create its -wal and -shm files
// (owned by this user, with the file's mode) and fail only at the first
// write, leaving them behind: the file's owner could no longer open it.
func writableFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case err == nil:
		return f.Close()
	case errors.Is(err, fs.ErrNotExist):
		return nil // a write command creates it
	}
	return fileError(path, err)
}

// isURL reports whether path names a store on a server (redis://...)
// rather than a file.
func isURL(path string) bool {
	i := strings.Index(path, "://")
	return i > 0 && !strings.ContainsAny(path[:i], "/\\")
}

// shown is path as messages show it: a URL without its password, the
// way Open's errors show it (a lone user name is the password too, and so
// is a password= parameter's value).
func shown(path string) string {
	if !isURL(path) {
		return path
	}
	return backend.RedactURL(path)
}

// openURL opens a store on a server. There is no read-only open of a
// server: the read commands only read.
func openURL(url string, opts ...state.Option) (*state.DB, error) {
	db, err := state.Open(url, append([]state.Option{state.WithoutBackground()}, opts...)...)
	if err != nil {
		return nil, exit(exitError, "%s", oneLine(unprefix(err.Error())))
	}
	return db, nil
}
