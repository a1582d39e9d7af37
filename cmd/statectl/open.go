package main

import (
	"errors"
	"io/fs"
	"os"

	"github.com/statekit/statekit/state"
)

// openRead opens path read-only: a missing file is an error, never created,
// and nothing in the file is changed or advanced.
func openRead(path string) (*state.DB, error) {
	if err := notADirectory(path); err != nil {
		return nil, err
	}
	db, err := state.Open(path, state.WithReadOnly(), state.WithoutBackground())
	if errors.Is(err, state.ErrReadOnly) {
		// The directory does not let SQLite create the -wal and -shm
		// files it needs: read a private copy when that is exact.
		snap, serr := openSnapshot(path)
		switch {
		case errors.Is(serr, errNoSnapshot):
			return nil, exit(exitError, "%s", readOnlyOpenMessage(path, err))
		case serr != nil:
			return nil, fileError(path, serr)
		}
		return snap, nil
	}
	switch {
	case err != nil:
		return nil, fileError(path, err)
	}
	return db, nil
}

// openWrite opens path for writing, creating it when missing. statectl
// starts no background sweeper: sweep is a command of its own.
func openWrite(path string, opts ...state.Option) (*state.DB, error) {
	if err := notADirectory(path); err != nil {
		return nil, err
	}
	db, err := state.Open(path, append([]state.Option{state.WithoutBackground()}, opts...)...)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, exit(exitError, "%s: cannot create it: no such directory", path)
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

// notADirectory refuses a directory, which SQLite would report as an I/O
// error.
func notADirectory(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return exit(exitError, "%s: is a directory", path)
	}
	return nil
}
