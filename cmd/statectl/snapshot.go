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
	"sync"

	"github.com/statekit/statekit/state"
)

// Reading a file without creating anything beside it. SQLite reads a WAL
// file only beside its -wal and -shm files, which it must create (and the
// -shm grow) when they are missing: in a directory the user cannot write
// or on a full disk it cannot, and elsewhere the files it creates belong
// to the reader, with the main file's mode, and can stop the file's owner
// from writing it. When path has no -wal file, no process has it open (the
// last to close removes it) and every commit is in the file itself; when
// its -wal is there but no process holds the -shm's lock (a writer that
// crashed, an Open that failed on a full disk) every commit is in the file
// and its -wal. Then a copy of both in a private directory, made while
// they stood still, reads exactly as the file would: the state of the last
// commit before the -wal was looked at. The files are read twice, into the
// copy and again; if the two differ a writer came meanwhile, and the copy
// is thrown away rather than read mixed: openRead looks again, and finds
// the writer's -wal to read beside.

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

// afterCopy, when a test sets it, runs once path and the files beside it are copied
// and before they are read again: the moment a writer that came meanwhile
// must be noticed.
var afterCopy func(path string)

// walPath is the -wal file of path, beside the file a symbolic link
// names, where SQLite puts it.
func walPath(path string) string { return besidePath(path, "-wal") }

// besidePath is the file of path with suffix (-wal, -journal), beside the
// file a symbolic link names, where SQLite puts it.
func besidePath(path, suffix string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return path + suffix
}

// sidecars are the files beside path a copy takes with it: the WAL, and the
// rollback journal a write cut short outside the WAL leaves, whose pages
// must be put back before the file is read (a read-only open of the copy
// refuses it then, as one of the file would).
var sidecars = [...]string{"-wal", "-journal"}

// hasLiveWAL reports whether path has a -wal file that a process may be
// using: one a copy could catch half-written, or miss a commit of.
func hasLiveWAL(path string) bool {
	wal := walPath(path)
	_, err := os.Lstat(wal)
	return !errors.Is(err, fs.ErrNotExist) && !unusedWAL(strings.TrimSuffix(wal, "-wal"))
}

// hasJournal reports whether path has a rollback journal beside it whose
// header is not zeroed: a write in rollback-journal mode (another
// program's: statekit writes one only to put a file in WAL mode) is under
// way, or was cut short. SQLite's locks tell which, so such a file is read
// in place: beside a writer it reads the last commit, and a write cut short
// is refused (ErrUnfinishedWrite) before SQLite looks for a WAL. Either way
// nothing is created beside the file.
func hasJournal(path string) bool {
	f, err := os.Open(besidePath(path, "-journal"))
	if err != nil {
		return false
	}
	defer f.Close()
	var first [1]byte
	_, err = f.ReadAt(first[:], 0)
	return err == nil && first[0] != 0
}

// openSnapshot opens a private copy of path (and of its -wal, if any)
// read-only. It returns errNoSnapshot when path has a live -wal file
// (hasLiveWAL), errChanged when the files changed while they were copied,
// and an error naming the cause when the copy cannot be made.
func openSnapshot(path string) (*state.DB, error) {
	if hasLiveWAL(path) {
		return nil, errNoSnapshot
	}
	dir, err := makeCopyDir()
	if err != nil {
		return nil, &tmpError{path: path, size: copySize(path), err: err}
	}
	cp := filepath.Join(dir, filepath.Base(path))
	db, err := copyAndOpen(path, cp)
	if err != nil {
		removeCopyDir(dir)
		return nil, err
	}
	snapshots[db] = dir
	copies[cp] = path
	return db, nil
}

// copyAndOpen copies path and its -wal to cp and cp-wal, checks they did
// not change meanwhile, and opens cp read-only.
func copyAndOpen(path, cp string) (*state.DB, error) {
	copied, err := hashFiles(path, cp)
	var ce *copyWriteError
	if errors.As(err, &ce) {
		return nil, &tmpError{path: path, size: copySize(path), err: ce.err}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: a private copy to read: %w", path, err)
	}
	if afterCopy != nil {
		afterCopy(path)
	}
	again, err := hashFiles(path, "")
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

// copySize is the room a copy of path and its -wal takes.
func copySize(path string) int64 {
	var n int64
	for _, suffix := range append([]string{""}, sidecars[:]...) {
		if fi, err := os.Stat(besidePath(path, suffix)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// copyWriteError is a failure to write the copy, not to read the file.
type copyWriteError struct{ err error }

func (e *copyWriteError) Error() string { return e.err.Error() }

// hashFiles returns the SHA-256 of path and of the files beside it a copy
// takes (sidecars; a zero sum for one there is not), copying them to new
// files cp, cp-wal and cp-journal on the way unless cp is empty.
func hashFiles(path, cp string) (sums [1 + len(sidecars)][sha256.Size]byte, err error) {
	if sums[0], err = hashFile(path, cp); err != nil {
		return sums, err
	}
	for i, suffix := range sidecars {
		to := ""
		if cp != "" {
			to = cp + suffix
		}
		sums[1+i], err = hashFile(besidePath(path, suffix), to)
		if errors.Is(err, fs.ErrNotExist) {
			// None, or the last writer's close removed it meanwhile:
			// the second reading differs from the first then.
			err = nil
		}
		if err != nil {
			return sums, err
		}
	}
	return sums, nil
}

// hashFile returns the SHA-256 of the file at path, copying it to a new
// file cp (mode 0600) on the way unless cp is empty. A failure to write
// the copy is a *copyWriteError.
func hashFile(path, cp string) (sum [sha256.Size]byte, err error) {
	src, err := os.Open(path)
	if err != nil {
		return sum, err
	}
	defer src.Close()
	h := sha256.New()
	var w io.Writer = h
	if cp != "" {
		dst, oerr := os.OpenFile(cp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if oerr != nil {
			return sum, &copyWriteError{err: oerr}
		}
		cw := &copyWriter{w: dst}
		defer func() {
			cerr := dst.Close()
			switch {
			case cw.err != nil:
				err = &copyWriteError{err: cw.err}
			case cerr != nil && err == nil:
				err = &copyWriteError{err: cerr}
			}
		}()
		w = io.MultiWriter(h, cw)
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
		removeCopyDir(dir)
	}
}

// copyDirs holds every private directory made for a copy until it is
// removed: a signal that ends statectl removes them first
// (removeCopiesOnSignal).
var (
	copyDirsMu sync.Mutex
	copyDirs   = map[string]bool{}
)

// makeCopyDir makes a private directory in $TMPDIR for a copy, and has the
// signals that end statectl remove it.
func makeCopyDir() (string, error) {
	removeCopiesOnSignal()
	copyDirsMu.Lock()
	defer copyDirsMu.Unlock()
	dir, err := os.MkdirTemp("", "statectl-")
	if err == nil {
		copyDirs[dir] = true
	}
	return dir, err
}

// removeCopyDir removes a directory makeCopyDir made.
func removeCopyDir(dir string) {
	copyDirsMu.Lock()
	defer copyDirsMu.Unlock()
	delete(copyDirs, dir)
	os.RemoveAll(dir)
}

// removeAllCopyDirs removes every directory makeCopyDir made, for a signal
// that ends statectl. It returns holding copyDirsMu, so that no copy is
// made or removed after it: statectl is ending.
func removeAllCopyDirs() {
	copyDirsMu.Lock()
	for dir := range copyDirs {
		delete(copyDirs, dir)
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
