package state

import (
	"database/sql"
	"fmt"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// noCheckpointAtClose has conn, a writable connection of a handle that
// failed, neither checkpoint the WAL into the file nor delete it when it
// closes as the file's last connection (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE).
// The guard's read transaction (guardRead) keeps a failed handle's
// connections from closing last, but only when the guard could read the
// file: through a WAL whose failed sync's pages the file system dropped
// (walhole.go), the pages it reads can be zeros, its read fails, it holds
// no lock, and the last connection to close, the checkpointer's, copied
// those zeros into the file and deleted the WAL. Told this, no connection
// of the handle writes the file or deletes the WAL as it closes, whatever
// the WAL holds; the next Open checks and repairs it.
func noCheckpointAtClose(conn *sql.Conn) error {
	if conn == nil {
		return nil
	}
	return conn.Raw(func(dc any) error {
		h := sqliteHandle(dc)
		if h == 0 {
			return fmt.Errorf("the SQLite driver's connection has no handle (%T)", dc)
		}
		tls := libc.NewTLS()
		defer tls.Close()
		// The arguments: int onoff, int *pRes (NULL), each in an 8-byte
		// slot of libc's va_list.
		const vaSlot = 8
		va := tls.Alloc(2 * vaSlot)
		defer tls.Free(2 * vaSlot)
		if rc := sqlite3.Xsqlite3_db_config(tls, h, sqlite3.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, libc.VaList(va, int32(1), uintptr(0))); rc != sqlite3.SQLITE_OK {
			return fmt.Errorf("sqlite3_db_config(SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE): result code %d", rc)
		}
		return nil
	})
}
