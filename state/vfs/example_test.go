package vfs_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/statekit/statekit/state/vfs"
)

// Register serves an FS to SQLite under a VFS name the DSN names.
func ExampleRegister() {
	dir, err := os.MkdirTemp("", "statekit-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	name, unregister, err := vfs.Register(vfs.OS())
	if err != nil {
		panic(err)
	}
	defer unregister() // after db.Close

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "example.db")+"?vfs="+name+"&_pragma=journal_mode(WAL)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE kv(k TEXT PRIMARY KEY, v); INSERT INTO kv VALUES ('a', 1)`); err != nil {
		panic(err)
	}
	var mode string
	var v int
	if err := db.QueryRow(`SELECT v, (SELECT journal_mode FROM pragma_journal_mode) FROM kv`).Scan(&v, &mode); err != nil {
		panic(err)
	}
	fmt.Println(mode, v)
	// Output: wal 1
}
