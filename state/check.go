package state

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// maxFindings bounds what Check reports; it stops looking after that.
const maxFindings = 100

// Check verifies the file and returns what it found wrong, one finding a
// line, none for a sound file: SQLite's integrity_check; the identity and
// schema (every table and index exactly as this statekit creates them, so
// a lease name has one row and its token only grows); the meta row; and
// every row's invariants: keys and lease names are valid UTF-8 without a
// NUL byte, values are integers or blobs within MaxValueBytes, deadlines
// are integers and never negative, lease owners are non-empty text, tokens
// are at least 1. It stops after 100
// findings. Check only reads, so it is safe beside a running writer.
//
// First, on the native VFS, Check looks for damage another program did to
// the files beside a sound database file while they are open: a -wal file
// shorter than its index (the -shm file) says, or whose header does not
// match it; the database file, its -wal or -shm deleted or replaced since
// Open. It reports those alone: reading the file through a damaged WAL
// would fail on the damage.
//
// Check returns an error, not findings, when it cannot read the file: ErrClosed
// after Close, ErrBusy, ErrIO, or ErrCorrupt when the damage stops a query.
func (db *DB) Check(ctx context.Context) ([]string, error) {
	if db.remote != nil {
		f, err := viaRemote(db, func(r remote) ([]string, error) { return r.Check(ctx) })
		return f, db.named("check", "", err)
	}
	if err := ctx.Err(); err != nil {
		// Before the expected schema is built, so that the message says
		// what ended the call, as every verb's does.
		return nil, db.named("check", "", fmt.Errorf("statekit: %w", err))
	}
	want, err := expectedSchema(ctx)
	if err != nil {
		return nil, db.named("check", "", err)
	}
	var findings []string
	err = db.do(ctx, reading, func(int64) error {
		if findings = db.outsideDamage(db.conn); len(findings) > 0 {
			// Reading the file through a damaged WAL could fail on the
			// damage and hide what was found.
			return nil
		}
		return db.inReadTx(ctx, func() (err error) {
			findings, err = db.check(ctx, want)
			return err
		})
	})
	if err != nil {
		return nil, db.named("check", "", err)
	}
	return findings, nil
}

// finder collects findings up to maxFindings.
type finder struct{ list []string }

func (f *finder) add(format string, args ...any) {
	if len(f.list) < maxFindings {
		f.list = append(f.list, fmt.Sprintf(format, args...))
	}
}

func (f *finder) room() int { return maxFindings - len(f.list) }

// rowCheck is one invariant over the rows of a table: query selects, for at
// most ?1 offending rows, the row's key (rowName names it) and a text
// describing what is wrong.
type rowCheck struct {
	table, query string
}

// rowChecks are statekit's invariants on rows.
var rowChecks = []rowCheck{
	{"kv", `SELECT key, 'key is ' || typeof(key) || ', not text' FROM kv WHERE typeof(key) <> 'text' LIMIT ?1`},
	{"kv", `SELECT key, 'key is empty' FROM kv WHERE key = '' LIMIT ?1`},
	{"kv", `SELECT substr(key, 1, 40), 'key is ' || length(CAST(key AS BLOB)) || ' bytes, over ' || ?2
FROM kv WHERE length(CAST(key AS BLOB)) > ?2 LIMIT ?1`},
	{"kv", `SELECT key, 'value is ' || typeof(value) || ', not integer or blob' FROM kv
WHERE typeof(value) NOT IN ('integer', 'blob') LIMIT ?1`},
	{"kv", `SELECT key, 'value is ' || length(value) || ' bytes, over ' || ?3 FROM kv
WHERE typeof(value) = 'blob' AND length(value) > ?3 LIMIT ?1`},
	{"kv", `SELECT key, 'deadline is ' || typeof(expires_at) || ', not integer or null' FROM kv
WHERE typeof(expires_at) NOT IN ('integer', 'null') LIMIT ?1`},
	{"kv", `SELECT key, 'deadline ' || expires_at || ' is negative' FROM kv
WHERE typeof(expires_at) = 'integer' AND expires_at < 0 LIMIT ?1`},
	{"leases", `SELECT name, 'name is ' || typeof(name) || ', not text' FROM leases
WHERE typeof(name) <> 'text' LIMIT ?1`},
	{"leases", `SELECT name, 'name is empty' FROM leases WHERE name = '' LIMIT ?1`},
	{"leases", `SELECT name, 'owner is ' || typeof(owner) || ', not text' FROM leases
WHERE typeof(owner) <> 'text' LIMIT ?1`},
	{"leases", `SELECT name, 'owner is empty' FROM leases WHERE owner = '' LIMIT ?1`},
	{"leases", `SELECT name, 'token ' || quote(token) || ' is not an integer of at least 1' FROM leases
WHERE typeof(token) <> 'integer' OR token < 1 LIMIT ?1`},
	{"leases", `SELECT name, 'deadline ' || quote(expires_at) || ' is not an integer of at least 0' FROM leases
WHERE typeof(expires_at) <> 'integer' OR expires_at < 0 LIMIT ?1`},
	{"meta", `SELECT k, 'unknown meta row' FROM meta
WHERE k NOT IN ('hwm', 'handles', 'durable_commits') AND k NOT GLOB 'hwm:[0-9]*' LIMIT ?1`},
	{"meta", `SELECT k, 'value ' || quote(v) || ' is not an integer of at least 0' FROM meta
WHERE typeof(v) <> 'integer' OR v < 0 LIMIT ?1`},
}

// check runs every check. Callers hold mu, inside a read transaction.
func (db *DB) check(ctx context.Context, want map[string]string) ([]string, error) {
	var f finder
	if err := db.checkIntegrity(ctx, &f); err != nil {
		return nil, err
	}
	if len(f.list) > 0 {
		// Reading rows of a damaged file could fail on the damage and hide
		// what integrity_check found.
		return f.list, nil
	}
	var appID, version int64
	if err := db.conn.QueryRowContext(ctx, `PRAGMA application_id`).Scan(&appID); err != nil {
		return nil, classify(ctx, err)
	}
	if err := db.conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return nil, classify(ctx, err)
	}
	if appID != ApplicationID {
		f.add("application_id is %#x, want %#x", appID, ApplicationID)
	}
	if version != SchemaVersion {
		f.add("schema version is %d, want %d", version, SchemaVersion)
	}
	have, err := readSchema(ctx, db.conn)
	if err != nil {
		return nil, classify(ctx, err)
	}
	if !diffSchema(&f, have, want) {
		// The row checks assume the schema; a wrong one makes them fail.
		return f.list, nil
	}
	var hwmRows int
	if err := db.conn.QueryRowContext(ctx, `SELECT count(*) FROM meta WHERE k = 'hwm'`).Scan(&hwmRows); err != nil {
		return nil, classify(ctx, err)
	}
	if hwmRows != 1 {
		f.add("meta: the high-water mark row is missing")
	}
	for _, c := range rowChecks {
		if f.room() == 0 {
			break
		}
		if err := db.checkRows(ctx, &f, c); err != nil {
			return nil, err
		}
	}
	if err := db.checkText(ctx, &f); err != nil {
		return nil, err
	}
	return f.list, nil
}

// checkIntegrity runs SQLite's integrity_check.
func (db *DB) checkIntegrity(ctx context.Context, f *finder) error {
	rows, err := db.conn.QueryContext(ctx, fmt.Sprintf(`PRAGMA integrity_check(%d)`, maxFindings))
	if err != nil {
		return classify(ctx, err)
	}
	defer rows.Close()
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return classify(ctx, err)
		}
		// One row may hold several lines, under a "*** in database
		// main ***" heading.
		for _, l := range strings.Split(text, "\n") {
			if l != "ok" && l != "" && !strings.HasPrefix(l, "*** ") {
				f.add("integrity_check: %s", l)
			}
		}
	}
	return classify(ctx, rows.Err())
}

// checkRows runs one row check.
func (db *DB) checkRows(ctx context.Context, f *finder, c rowCheck) error {
	rows, err := db.conn.QueryContext(ctx, c.query, f.room(), MaxKeyBytes, MaxValueBytes)
	if err != nil {
		return classify(ctx, err)
	}
	defer rows.Close()
	for rows.Next() {
		var row any
		var what string
		if err := rows.Scan(&row, &what); err != nil {
			return classify(ctx, err)
		}
		f.add("%s %s: %s", c.table, rowName(row), what)
	}
	return classify(ctx, rows.Err())
}

// querier is what readSchema needs from a connection or a database.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readSchema returns statekit's part of a schema: each object's
// "type name" mapped to its CREATE statement with whitespace collapsed.
// SQLite's own objects (sqlite_*) are left out.
func readSchema(ctx context.Context, q querier) (map[string]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT type, name, ifnull(sql, '') FROM sqlite_schema
WHERE name NOT LIKE 'sqlite\_%' ESCAPE '\'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var typ, name, text string
		if err := rows.Scan(&typ, &name, &text); err != nil {
			return nil, err
		}
		m[typ+" "+name] = strings.Join(strings.Fields(text), " ")
	}
	return m, rows.Err()
}

// expectedSchema creates the schema in a private in-memory database and
// reads it back: the shape every statekit file must have.
func expectedSchema(ctx context.Context) (map[string]string, error) {
	mem, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, fmt.Errorf("expected schema: %w", err)
	}
	defer mem.Close()
	mem.SetMaxOpenConns(1)
	if _, err := mem.ExecContext(ctx, schemaSQL); err != nil {
		return nil, fmt.Errorf("expected schema: %w", err)
	}
	want, err := readSchema(ctx, mem)
	if err != nil {
		return nil, fmt.Errorf("expected schema: %w", err)
	}
	return want, nil
}

// diffSchema reports objects missing, different or unexpected, in sorted
// order, and whether every object statekit needs is there as it should be.
func diffSchema(f *finder, have, want map[string]string) (sound bool) {
	sound = true
	for _, obj := range sortedKeys(want) {
		got, ok := have[obj]
		switch {
		case !ok:
			f.add("schema: %s is missing", obj)
			sound = false
		case got != want[obj]:
			f.add("schema: %s is %q, want %q", obj, got, want[obj])
			sound = false
		}
	}
	for _, obj := range sortedKeys(have) {
		if _, ok := want[obj]; !ok {
			f.add("schema: unexpected %s", obj)
		}
	}
	return sound
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
