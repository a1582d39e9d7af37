package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/statekit/statekit/state"
)

// Reading a file without creating anything beside it. SQLite reads a WAL
// file only beside its -wal and -shm files, which it must create (and the
// -shm grow) when they are missing: in a directory the user cannot write
// or on a full disk it cannot, and elsewhere the files it creates belong
// to the reader, with the main file's mode, and can stop the file's owner
// from writing it. When path has no -wal file, no process has it open (the
// last to close removes it) and every commit is in the file itself; so too
// when its -wal is empty and no process holds the -shm's lock (an Open
// that failed on a full disk leaves them so). Then a copy in a private
// directory, made while the file stood still, reads exactly as the file
// would: the state of the last commit before the -wal was looked at. The
// file is read twice, into the copy and again; if the two differ a writer
// came meanwhile (and checkpointed into it), and the copy is thrown away
// rather than read mixed: openRead looks again, and finds the writer's
// -wal to read beside.

// snapshots holds the private directory of each DB opened on a copy, for
// closeDB to remove.
var snapshots = map[*state.DB]string{}

// copies maps the path of each copy open to the path it copies, for
// messages to name the file the user gave.
var copies = map[string]string{}

// errNoSnapshot says a copy cannot stand in for the file: it has a WAL.
var errNoSnapshot = errors.New("the file has a WAL")

// errChanged says the file changed while it was copied.
var errChanged = errors.New("it changed while statectl copied it to read without creating files beside it; try again")

// copyTries bounds the copies openRead makes of a file that keeps
// changing while it is copied.
const copyTries = 3

// hasLiveWAL reports whether path has a -wal file that is not empty or
// that a process may be using: one whose commits a copy of the file alone
// would miss. The -wal is looked for beside the file a symbolic link
// names, where SQLite puts it.
func hasLiveWAL(path string) bool {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	_, err := os.Lstat(path + "-wal")
	return !errors.Is(err, fs.ErrNotExist) && !unusedEmptyWAL(path)
}

// openSnapshot opens a private copy of path read-only. It returns
// errNoSnapshot when path has a live -wal file (hasLiveWAL), errChanged
// when the file changed while it was copied, and an error naming the cause
// when the copy cannot be made.
func openSnapshot(path string) (*state.DB, error) {
	if hasLiveWAL(path) {
		return nil, errNoSnapshot
	}
	dir, err := os.MkdirTemp("", "statectl-")
	if err != nil {
		var n int64
		if fi, serr := os.Stat(path); serr == nil {
			n = fi.Size()
		}
		return nil, &tmpError{path: path, size: n, err: err}
	}
	cp := filepath.Join(dir, filepath.Base(path))
	db, err := copyAndOpen(path, cp)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	snapshots[db] = dir
	copies[cp] = path
	return db, nil
}

// copyAndOpen copies path to cp, checks path did not change meanwhile, and
// opens cp read-only.
func copyAndOpen(path, cp string) (*state.DB, error) {
	copied, err := hashFile(path, cp)
	var te *tmpError
	if errors.As(err, &te) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%s: a private copy to read: %w", path, err)
	}
	again, err := hashFile(path, "")
	if err != nil {
		return nil, fmt.Errorf("%s: a private copy to read: %w", path, err)
	}
	if copied != again {
		return nil, fmt.Errorf("%s: %w", path, errChanged)
	}
	db, err := state.Open(cp, state.WithReadOnly(), state.WithoutBackground())
	if err != nil {
		return nil, &copyError{err: err, cp: cp, path: path}
	}
	return db, nil
}

// copyError is the error of opening the copy cp of path, naming path: the
// copy is statectl's business.
type copyError struct {
	err      error
	cp, path string
}

func (e *copyError) Error() string { return strings.ReplaceAll(e.err.Error(), e.cp, e.path) }

// Unwrap returns the error of opening the copy.
func (e *copyError) Unwrap() error { return e.err }

// tmpError is a failure to make the private copy of path in $TMPDIR
// (missing, not writable, full): an error of the directory the copy goes
// in, which messages must not report as the file's own.
type tmpError struct {
	path string
	size int64 // the room the copy needs
	err  error
}

func (e *tmpError) Error() string {
	cause := e.err
	var pe *fs.PathError
	if errors.As(cause, &pe) {
		cause = pe.Err // the copy's own path means nothing to the user
	}
	return fmt.Sprintf("%s: cannot make the private copy it is read from in %s: %v; "+
		"set TMPDIR to a directory with room for %s", e.path, os.TempDir(), cause, size(e.size))
}

// hashFile returns the SHA-256 of the file at path, copying it to a new
// file cp (mode 0600) on the way unless cp is empty. A failure to write
// the copy is a *tmpError.
func hashFile(path, cp string) (sum [sha256.Size]byte, err error) {
	src, err := os.Open(path)
	if err != nil {
		return sum, err
	}
	defer src.Close()
	h := sha256.New()
	var w io.Writer = h
	if cp != "" {
		var n int64
		if fi, err := src.Stat(); err == nil {
			n = fi.Size()
		}
		dst, oerr := os.OpenFile(cp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if oerr != nil {
			return sum, &tmpError{path: path, size: n, err: oerr}
		}
		defer func() {
			if cerr := dst.Close(); cerr != nil && err == nil {
				err = &tmpError{path: path, size: n, err: cerr}
			}
		}()
		cw := &copyWriter{w: dst}
		w = io.MultiWriter(h, cw)
		defer func() {
			if cw.err != nil {
				err = &tmpError{path: path, size: n, err: cw.err}
			}
		}()
	}
	if _, err := io.Copy(w, src); err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// copyWriter writes the copy and keeps its first error, to tell a copy
// that could not be written from a file that could not be read.
type copyWriter struct {
	w   io.Writer
	err error
}

func (c *copyWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// removeSnapshot removes the private copy db was opened on, if any.
func removeSnapshot(db *state.DB) {
	if dir, ok := snapshots[db]; ok {
		delete(snapshots, db)
		delete(copies, db.Path())
		os.RemoveAll(dir)
	}
}

// uncopied is msg naming the files copies stand for instead of the copies.
func uncopied(msg string) string {
	for cp, path := range copies {
		msg = strings.ReplaceAll(msg, cp, path)
	}
	return msg
}
