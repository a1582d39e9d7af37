package main

import (
	"errors"
	"os"
	"strings"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
)

// Bad input to a write command must not leave a new file behind. The
// library checks keys, values, ttls and lease names and owners when a verb
// runs, on an open file; statectl keeps no copy of its rules. So when the
// file is missing, the verb runs first on a scratch file in memory (the
// simulator's disk, package faults, with no fault armed), and input the library refuses there is refused before
// the file is created. The scratch file needs no directory: $TMPDIR may be
// missing, or full.

// scratchPath is the scratch file's name in its memFS.
const scratchPath = "/scratch.state"

// checkInput runs verb on a scratch file when path is a missing file, and
// returns the library's error naming path if it refuses the input: an
// invalid key, value, ttl or argument. Any other outcome is nil: the verb
// runs on path next.
func checkInput(path string, verb func(*state.DB) error) error {
	if isURL(path) {
		return nil
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	db, err := state.Open(scratchPath, state.WithFS(faults.NewMemFS(1).Process(1)), state.WithoutBackground())
	if err != nil {
		return nil // the verb on path will say what is wrong, if anything
	}
	err = verb(db)
	db.Close()
	if !refusedInput(err) {
		return nil
	}
	// The library's message starts with the file's name: path's, not the
	// scratch file's (a key may hold that name too: only the start goes).
	msg, _ := strings.CutPrefix(err.Error(), scratchPath+": ")
	return exit(exitError, "%s", fileMessage(path, errors.New(msg)))
}

// refusedInput reports whether err is the library's refusal of a verb's
// input, which does not depend on the file.
func refusedInput(err error) bool {
	return errors.Is(err, state.ErrInvalidKey) || errors.Is(err, state.ErrInvalidValue) ||
		errors.Is(err, state.ErrInvalidTTL) || errors.Is(err, state.ErrInvalidArgument)
}
