package state

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/state/vfs"
)

// The WAL synced apart from SQLite. A lease grant must be durable before
// it is answered, and must leave every commit before it durable too. A
// grant that commits with synchronous=FULL has SQLite sync the WAL; two
// cannot: a grant inside Update, whose transaction began before anyone
// knew it would grant (synchronous cannot change inside a transaction),
// and a grant that wrote nothing (the holder asked again for the deadline
// it has: SQLite writes nothing for a row overwritten with the same bytes,
// so its commit syncs nothing). Both have the WAL synced through a
// descriptor of the engine's own, after COMMIT. That needs none of
// SQLite's locks: a write that syncs instead (as the engine once ran) needs
// the file's write lock, which another process may hold past the verb's
// budget, and the grant, committed already, is then neither durable nor
// undone.
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
func (db *DB) syncGrant() error {
	err := fmt.Errorf("the WAL is not open to sync")
	if db.wal != nil {
		db.syncWALDir()
		err = db.wal.Sync()
	}
	if err == nil {
		return nil
	}
	return &causeError{
		msg:  fmt.Sprintf("%v: lease granted and committed, but the sync of %s%s failed (%v); reopen the file", ErrIO, db.path, walSuffix, err),
		errs: []error{ErrIO, err},
	}
}

// syncWALDir syncs, once a handle, the directory that holds the WAL on the
// operating system's files, so that a WAL created since the last sync of
// its creator is found after a power loss. SQLite does the same at the
// first sync of a WAL it created, and ignores a failure; so does this. A
// simulated disk (WithFS) makes a file's creation durable at once.
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
