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
	switch {
	case errors.Is(err, state.ErrReadOnly):
		return nil, exit(exitError, "%s", readOnlyOpenMessage(path, err))
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

// closeDB closes db and keeps the first error.
func closeDB(db *state.DB, path string, err *error) {
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
