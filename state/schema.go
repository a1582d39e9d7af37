package state

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The file's identity and schema version, kept in SQLite's header so the
// sqlite3 shell shows them (PRAGMA application_id, PRAGMA user_version).
const (
	// ApplicationID marks a statekit file: "STK1" in ASCII.
	ApplicationID = 0x53544B31
	// SchemaVersion is the schema this statekit writes and reads.
	SchemaVersion = 1
)

// schemaSQL is the documented, stable schema. Deadlines are unix
// milliseconds; NULL in kv.expires_at means no deadline. A lease row is
// never deleted: release sets expires_at to 0 and keeps the token.
// meta holds 'hwm' (the time mark folded in by clean closes), one 'hwm:<n>'
// row per open or crashed writable handle (hwm.go), 'handles' (the handle
// counter), and in files from earlier builds 'durable_commits' (a count of
// commits forced durable, no longer written).
const schemaSQL = `
CREATE TABLE kv (
	key        TEXT PRIMARY KEY,
	value      NOT NULL,
	expires_at INTEGER
);
CREATE INDEX kv_expires ON kv(expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE leases (
	name       TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,
	token      INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE meta (
	k TEXT PRIMARY KEY,
	v INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO meta(k, v) VALUES ('hwm', 0);
`

// inspectSQL reads the file's identity in one snapshot.
const inspectSQL = `SELECT (SELECT application_id FROM pragma_application_id()),
	(SELECT user_version FROM pragma_user_version()),
	(SELECT count(*) FROM sqlite_schema)`

// fileKind is what inspect found.
type fileKind int

const (
	fileEmpty    fileKind = iota // no schema, no application id: ours to create
	fileStatekit                 // ours, current schema
)

// inspect reads the file's identity without writing anything, so a foreign
// file is left byte-for-byte untouched.
func inspect(ctx context.Context, conn *sql.Conn, path string) (fileKind, error) {
	var appID, version, objects int64
	// One statement is one snapshot: another process creating the file at
	// this moment is seen either before or after its commit, never halfway.
	err := conn.QueryRowContext(ctx, inspectSQL).Scan(&appID, &version, &objects)
	if err != nil {
		return 0, openError(ctx, path, err)
	}
	switch {
	case appID == 0 && version == 0 && objects == 0:
		return fileEmpty, nil
	case appID != ApplicationID:
		return 0, fmt.Errorf("%w: %s is an SQLite database of another application (application_id %#x)", ErrNotStatekit, path, appID)
	case version > SchemaVersion:
		return 0, fmt.Errorf("%w: %s has schema version %d, this statekit knows up to %d", ErrSchemaTooNew, path, version, SchemaVersion)
	case version != SchemaVersion:
		return 0, fmt.Errorf("%w: %s has unknown schema version %d", ErrNotStatekit, path, version)
	}
	return fileStatekit, nil
}

// openError names the file in an error met while opening it.
func openError(ctx context.Context, path string, err error) error {
	switch sqliteCode(err) {
	case sqliteNotADB:
		return fmt.Errorf("%w: %s is not an SQLite database", ErrNotStatekit, path)
	case sqliteError:
		// Every statement Open runs is a constant: an SQL error means the
		// file's format or schema is damaged ("unsupported file format",
		// "malformed database schema").
		if ctx.Err() == nil {
			return fmt.Errorf("open %s: %w: %v", path, ErrCorrupt, err)
		}
	}
	return fmt.Errorf("open %s: %w", path, classify(ctx, err))
}

// create makes the schema in an empty file. Several processes may race to
// create the same new file: the write lock orders them and the second finds
// the schema there.
func create(ctx context.Context, conn *sql.Conn, path string, cfg config) error {
	// journal_mode=WAL changes the header, so it runs only once inspect
	// found the file empty or ours.
	if err := toWAL(ctx, conn, cfg); err != nil {
		return openError(ctx, path, fmt.Errorf("journal_mode: %w", roomRefusedOn(conn, err)))
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return openError(ctx, path, err)
	}
	err := func() error {
		kind, err := inspect(ctx, conn, path)
		if err != nil || kind == fileStatekit {
			return err
		}
		if _, err := conn.ExecContext(ctx, schemaSQL); err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA application_id = %d`, ApplicationID)); err != nil {
			return err
		}
		_, err = conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, SchemaVersion))
		return err
	}()
	if err != nil {
		err = roomRefusedOn(conn, err)
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
		return openError(ctx, path, err)
	}
	if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
		return openError(ctx, path, roomRefusedOn(conn, err))
	}
	return nil
}

// backToWAL is toWAL for a file with a schema. One another program
// switched out of WAL mode (the sqlite3 shell's PRAGMA journal_mode=DELETE)
// is switched back, and its -wal made, which SQLite does only at the next
// read and Open opens next (walsync.go).
func backToWAL(ctx context.Context, conn *sql.Conn, cfg config) error {
	var mode string
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return err
	}
	if err := toWAL(ctx, conn, cfg); err != nil || mode == "wal" {
		return err
	}
	_, err := conn.ExecContext(ctx, `SELECT count(*) FROM sqlite_schema`)
	return err
}

// toWAL switches the file to WAL mode. SQLite answers SQLITE_BUSY at once,
// without its busy handler, when another process reads the file during the
// switch (several processes creating one file at the same moment), so this
// retries for up to the busy timeout, pausing on the clock between tries.
// Only a new file's first opens contend here; once the file is in WAL mode
// the pragma changes nothing.
func toWAL(ctx context.Context, conn *sql.Conn, cfg config) error {
	const pause = 5 * time.Millisecond
	for tries := int(cfg.busyTimeout/pause) + 1; ; tries-- {
		_, err := conn.ExecContext(ctx, `PRAGMA journal_mode=WAL`)
		if c := sqliteCode(err); tries <= 1 || (c != sqliteBusy && c != sqliteLocked) {
			return err
		}
		cfg.sleep(pause)
	}
}

// sleep waits d on the clock: through it when it is a Sleeper, else on
// the operating system's timer.
func (c config) sleep(d time.Duration) {
	if s, ok := c.clock.(Sleeper); ok {
		s.Sleep(d, nil)
		return
	}
	time.Sleep(d)
}
