package state

import (
	"fmt"
)

// A file system can stop granting POSIX locks under an open handle: a
// network file system whose lock service stopped. SQLite's unix VFS
// reports a lock call that fails for that (ENOLCK) as SQLITE_BUSY, as if
// another process held the lock, and keeps no errno for it: a write waited
// out the busy timeout and said another connection held the lock, and a
// read lock on the WAL index, which SQLite retries on its own with pauses
// of its own for about 10 s, ended in SQLITE_PROTOCOL ("locking
// protocol"), which no sentinel named, so every verb took 10 s and more
// with that answer. So when a statement ends busy the engine asks the file
// system, with lockProbe's F_GETLK, whether it still takes locks; if it
// refuses them, the verb is ErrIO wrapping the failed call, and the handle
// ends: without locks, no write of another process is kept apart from
// this one's, and the next verbs fail at once. Close then leaves the WAL
// as it is (no repair of a failed handle's WAL, walrepair.go): another
// process may be writing the file, and each statement would wait out
// SQLite's retries again.

// locksLost returns ErrIO wrapping the failed lock call when the file
// system holding the handle's file refuses POSIX locks now (lockProbe),
// and marks the handle lockless; else nil. It asks only on the native VFS,
// whose locks are the kernel's. Callers hold mu.
func (db *DB) locksLost() error {
	if db.vfsName != "" || db.file == nil || db.file.f == nil {
		return nil
	}
	cause := lockProbe(db.file.f, db.path)
	if cause == nil {
		return nil
	}
	db.lockless = true
	return &causeError{
		msg: fmt.Sprintf("%v: the file system stopped granting locks on the file under the open handle: %s: its "+
			"lock service may have stopped (a network file system); the handle has ended: reopen the file, kept "+
			"on a local disk", ErrIO, osCauseText(cause)),
		errs: []error{ErrIO, cause},
	}
}
