package state

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/state/vfs"
	"modernc.org/sqlite"
)

// The WAL synced apart from SQLite. A lease grant must be durable before
// it is answered, and must leave every commit before it durable too. The
// engine syncs the WAL for it through a descriptor of its own, after
// COMMIT, rather than have SQLite sync inside COMMIT (synchronous=FULL):
// SQLite would hold the file's write lock through the disk's flush, and
// every other process that writes the file would wait it out, while after
// COMMIT they write meanwhile (README, Performance). It also serves the grants SQLite could not sync: one
// inside Update, whose transaction began before anyone knew it would grant
// (synchronous cannot change inside a transaction), and one that wrote
// nothing (the holder asked again for the deadline it has: SQLite writes
// nothing for a row overwritten with the same bytes, so its commit syncs
// nothing). The sync needs none of SQLite's locks: a write that syncs
// instead (as the engine once ran) needs the file's write lock, which
// another process may hold past the verb's budget, and the grant,
// committed already, is then neither durable nor undone. Between COMMIT
// and the sync another connection can read the grant; a power loss there
// takes it back before its caller was answered.
//
// The descriptor is opened at Open, before repairWAL, as the checkpoint
// connection's is (walrepair.go): a sync of the WAL that fails after it is
// reported to it, once, and a failure from before was repaired. The WAL
// file stays the same file while the handle's connections are open (SQLite
// deletes it only when the last connection to the file closes).

// openWALSyncer opens the WAL to sync it. Callers run Open, for a
// writable handle, once its connection has the WAL open.
func (db *DB) openWALSyncer() error {
	f, err := openSyncer(db.cfg.fs, db.path, walSuffix, vfs.OpenWAL)
	if err != nil {
		return err
	}
	db.wal = f
	return nil
}

// closeWALSyncer closes the descriptor openWALSyncer opened, if any.
func (db *DB) closeWALSyncer() error {
	if db.wal == nil {
		return nil
	}
	err := db.wal.Close()
	db.wal = nil
	return err
}

// grantNeedsSync reports whether a grant must have the WAL synced after a
// commit that SQLite did not sync: not when every commit is FULL, nor
// under the planted bug that commits grants NORMAL.
func (db *DB) grantNeedsSync() bool {
	return db.cfg.sync != SyncFull && !db.cfg.bugs.Has(bugs.LeaseNormalSync)
}

// syncGrant has the WAL synced for a grant whose commit SQLite did not
// sync, making every commit in it so far durable, whichever process wrote
// it. A failure is an I/O error that ends the handle (callers note it):
// the grant committed, what reached the disk is not known, and a token must
// never be handed out twice. A failed sync is never retried as if nothing
// happened. Callers hold mu.
func (db *DB) syncGrant() error { return db.syncWAL("lease granted and committed") }

// A SyncFull handle's commits are synchronous=NORMAL, and each is followed,
// before anything is answered, by a sync of the WAL through the engine's
// descriptor (syncCommitted). SQLite's synchronous=FULL would sync inside
// COMMIT, holding the file's write lock for the length of a disk flush, so
// that other processes could not write while one waited for its disk;
// after COMMIT the lock is free and they can, and their commits' syncs
// overlap. What the sync promises is the same: the commit, and every
// commit before it in the WAL, survives a power loss before the verb
// returns. What differs: between COMMIT and the sync another connection
// can already read the commit, as it can a grant inside Update (a power
// loss there takes it back before anyone was answered). The handle's own
// lock (mu) is held through the sync, so its other verbs wait for it, and
// with a deadline give up at it, as behind any verb stuck in the kernel.

// syncCommitted has the WAL synced, for a SyncFull handle, when its
// connection wrote pages since the last sync: after a commit of its, and
// before the verb that committed is answered. A read that only moved the
// time mark forward syncs too, since no verb may use a time a power loss
// could take back on a SyncFull handle. write says the verb is a write
// that succeeded: it syncs even when it wrote nothing (a Set of the bytes
// a row has, a Del of an absent key), since what it answered may rest on
// another connection's commit that is not durable yet, and a SyncFull write
// must leave every commit before it durable. A failure ends the handle.
// Callers hold mu.
func (db *DB) syncCommitted(write bool) error {
	if db.cfg.sync != SyncFull || db.cfg.readOnly || db.failed != nil || db.cfg.bugs.Has(bugs.SyncFullUnsynced) {
		return nil
	}
	n := db.pagesWritten()
	if !write && n >= 0 && n == db.syncedPages && !db.unsyncedBeforeReset {
		return nil
	}
	return db.note(db.syncWAL("committed"))
}

// syncWAL syncs the WAL through the engine's descriptor; what names what
// committed before it, for the error. Callers hold mu.
func (db *DB) syncWAL(what string) error {
	n := db.pagesWritten()
	err := fmt.Errorf("the WAL is not open to sync")
	if db.wal != nil {
		db.syncWALDir()
		err = db.wal.Sync()
	}
	if err == nil {
		db.syncedPages, db.unsyncedBeforeReset = n, false
		return nil
	}
	db.forgetIndex(db.conn) // the failed sync may have taken frames back (indexforget.go)
	return &causeError{
		msg:  fmt.Sprintf("%v: %s, but the sync of %s%s failed (%v); reopen the file", ErrIO, what, db.path, walSuffix, err),
		errs: []error{ErrIO, err},
	}
}

// resetPagesWritten starts pagesWritten's count over (a checkpoint does,
// once the WAL is in the file), keeping syncCommitted's account: pages
// written since the last sync stay owed one. Callers hold mu.
func (db *DB) resetPagesWritten() {
	if db.pages == nil {
		return
	}
	if n := db.pagesWritten(); n < 0 || n != db.syncedPages {
		db.unsyncedBeforeReset = true
	}
	_, _, _ = db.pages.Status(sqlite.DBStatusCacheWrite, true)
	db.syncedPages = 0
}

// syncWALDir syncs, once a handle, the directory that holds the WAL on the
// operating system's files, so that a WAL created since the last sync of
// its creator is found after a power loss. SQLite does the same at the
// first sync of a WAL it created, and ignores a failure; so does this. On a
// handle WithFS, SQLite's VFS syncs the directory itself at that first sync
// (its sync of the new WAL's header), when the FS is a vfs.DirSyncer.
func (db *DB) syncWALDir() {
	if db.walDirSynced || db.cfg.fs != nil {
		return
	}
	db.walDirSynced = true
	dir, err := os.Open(filepath.Dir(realPath(db.path)))
	if err != nil {
		return
	}
	_ = dir.Sync()
	_ = dir.Close()
}
