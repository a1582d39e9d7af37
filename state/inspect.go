package state

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Read-only inspection: what statectl and any operator needs to see a file
// without changing it. Every method here only reads, so it works on a handle
// opened WithReadOnly, and on a writable handle it takes the lock for one
// short page at a time, never across a caller's callback.

const (
	// scanPageRows bounds the rows one Scan or Leases page reads under the
	// lock.
	scanPageRows = 256
	// maxFindings bounds what Check reports; it stops looking after that.
	maxFindings = 100

	// The scan query is put together from these by scanSQL: the first page
	// starts at the prefix (?1), the next ones after the last key seen
	// (?1); a prefix bounds it with the first key past it (?2). ?3
	// includes expired rows, ?4 is now, ?5 the page size.
	scanFromSQL    = `SELECT key, value, expires_at FROM kv WHERE key >= ?1`
	scanAfterSQL   = `SELECT key, value, expires_at FROM kv WHERE key > ?1`
	scanBoundedSQL = ` AND key < ?2`
	scanTailSQL    = ` AND (?3 OR expires_at IS NULL OR expires_at > ?4) ORDER BY key LIMIT ?5`

	// leasesSQL reads a page of lease rows after the name ?1 ('' for the
	// first page); ?2 includes free ones, ?3 is now, ?4 the page size.
	leasesSQL = `SELECT name, owner, token, expires_at FROM leases
WHERE name > ?1 AND (?2 OR expires_at > ?3)
ORDER BY name LIMIT ?4`

	// statsKeysSQL counts live keys, live keys with a deadline, and expired
	// keys not swept yet, at now ?1.
	statsKeysSQL = `SELECT
	count(*) FILTER (WHERE expires_at IS NULL OR expires_at > ?1),
	count(*) FILTER (WHERE expires_at > ?1),
	count(*) FILTER (WHERE expires_at <= ?1)
FROM kv`
	// statsLeasesSQL counts leases held at now ?1, and every lease row.
	statsLeasesSQL = `SELECT count(*) FILTER (WHERE expires_at > ?1), count(*) FROM leases`
)

// HighWaterLead is the furthest ahead of the engine's time a running writer
// keeps the file's high-water mark (a writer that started from a mark ahead
// of the wall clock keeps a shorter lead). A mark further ahead of the wall
// clock than this means the wall clock stepped back, a writer's clock ran
// ahead, or processes were killed again and again.
const HighWaterLead = hwmLeadMillis * time.Millisecond

// KeyInfo is one row of the key table, as Scan reports it.
type KeyInfo struct {
	Key     string
	Value   Value
	Expires time.Time     // the deadline; the zero Time when the key has none
	Left    time.Duration // time until the deadline: NoExpiry without one, zero or less once passed
	Expired bool          // the deadline has passed: the key is absent to every verb and awaits a sweep
}

// LeaseStatus says whether a lease row is held, and if not, why.
type LeaseStatus int

// The lease statuses.
const (
	// LeaseHeld is a granted lease whose deadline has not passed.
	LeaseHeld LeaseStatus = iota + 1
	// LeaseExpired is a lease whose holder let its deadline pass.
	LeaseExpired
	// LeaseReleased is a lease its holder released.
	LeaseReleased
)

// String returns "held", "expired" or "released".
func (s LeaseStatus) String() string {
	switch s {
	case LeaseHeld:
		return "held"
	case LeaseExpired:
		return "expired"
	case LeaseReleased:
		return "released"
	}
	return fmt.Sprintf("LeaseStatus(%d)", int(s))
}

// LeaseInfo is one row of the lease table, as Leases reports it. A row is
// never deleted, so a free lease still shows its last owner and token; the
// next grant gets Token+1.
type LeaseInfo struct {
	Name    string
	Owner   string        // the holder, or the last holder of a free lease
	Token   int64         // the fencing token of the current or last grant
	Expires time.Time     // when the lease ends unless renewed; the zero Time once released
	Left    time.Duration // time until Expires: zero or less for a free lease
	Status  LeaseStatus
}

// Stats is a summary of a file, as Stats reports it.
type Stats struct {
	SchemaVersion    int   // PRAGMA user_version
	Keys             int64 // live keys
	KeysWithDeadline int64 // live keys that have a deadline
	ExpiredKeys      int64 // keys past their deadline, not swept yet
	Leases           int64 // leases held now
	LeaseNames       int64 // lease rows: every name ever granted, held or free
	PageSize         int64 // bytes per database page
	Pages            int64 // pages in the database, the WAL's newer pages included
	FreePages        int64 // pages on the free list

	// HighWater is the file's clock high-water mark: a time at or after
	// every time a writer of the file has used.
	HighWater time.Time
	// Now is the engine's time the counts were taken at: the larger of
	// the wall clock at Open and the mark, advanced by the monotonic clock.
	Now time.Time
	// Wall is the injected clock's wall time when the counts were taken.
	Wall time.Time
	// ClockBehind is how far Wall is behind HighWater beyond HighWaterLead:
	// zero for a sane clock. While it is positive, the engine counts
	// deadlines from the mark, not from the wall clock.
	ClockBehind time.Duration
}

// Scan calls fn for each key that starts with prefix (every key for ""), in
// byte order of the keys. With includeExpired it also reports keys past their
// deadline that no sweep has deleted yet, marked Expired; without it, only
// live keys.
//
// Scan reads a page of keys at a time and calls fn outside the handle's lock,
// so fn may call the DB's other methods; Scan is therefore not a snapshot:
// a key written during the scan may or may not appear, and none appears
// twice. If fn returns an error, Scan stops and returns it.
//
// Scan returns ErrInvalidArgument for a nil fn, ErrClosed after Close, a
// wrapped ErrCorrupt naming the key for a value that is neither an integer
// nor bytes (the handle stays usable), and the errors of a failed read
// (ErrBusy, ErrIO, ErrCorrupt).
func (db *DB) Scan(ctx context.Context, prefix string, includeExpired bool, fn func(KeyInfo) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil Scan callback", ErrInvalidArgument)
	}
	end := prefixEnd(prefix)
	query, from := scanSQL(true, end != ""), prefix
	for {
		var page []rawKey
		var now int64
		err := db.do(ctx, reading, func(n int64) (err error) {
			now = n
			page, err = db.scanPage(ctx, query, from, end, includeExpired, now)
			return err
		})
		if err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		for _, r := range page {
			k, err := r.info(now)
			if err != nil {
				return fmt.Errorf("scan: %w", err)
			}
			if err := fn(k); err != nil {
				return err
			}
		}
		if len(page) < scanPageRows {
			return nil
		}
		query, from = scanSQL(false, end != ""), page[len(page)-1].key
	}
}

// scanSQL returns the query for the first page or a next one, bounded by
// the end of a prefix or not. A bound in the query, rather than a test of
// ?2 in it, lets SQLite stop at the end of the prefix.
func scanSQL(first, bounded bool) string {
	q := scanAfterSQL
	if first {
		q = scanFromSQL
	}
	if bounded {
		q += scanBoundedSQL
	}
	return q + scanTailSQL
}

// rawKey is a kv row as read, converted to a KeyInfo outside the lock.
type rawKey struct {
	key     string
	value   any
	expires sql.NullInt64
}

func (r rawKey) info(now int64) (KeyInfo, error) {
	v, err := fromSQL(r.value)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("key %q: %w", r.key, err)
	}
	k := KeyInfo{Key: r.key, Value: v, Left: NoExpiry}
	if r.expires.Valid {
		k.Expires = time.UnixMilli(r.expires.Int64)
		k.Left = time.Duration(r.expires.Int64-now) * time.Millisecond
		k.Expired = r.expires.Int64 <= now
	}
	return k, nil
}

// scanPage reads up to scanPageRows kv rows. Callers hold mu.
func (db *DB) scanPage(ctx context.Context, query, from, end string, expired bool, now int64) ([]rawKey, error) {
	rows, err := db.conn.QueryContext(ctx, query, from, end, expired, now, scanPageRows)
	if err != nil {
		return nil, classify(ctx, err)
	}
	defer rows.Close()
	var page []rawKey
	for rows.Next() {
		var r rawKey
		if err := rows.Scan(&r.key, &r.value, &r.expires); err != nil {
			return nil, classify(ctx, err)
		}
		page = append(page, r)
	}
	return page, classify(ctx, rows.Err())
}

// prefixEnd returns the least string above every string that starts with
// prefix, in SQLite's byte order, or "" when there is none (no prefix, or a
// prefix of 0xff bytes only). The result need not be valid UTF-8: SQLite
// compares text with memcmp.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

// Leases calls fn for each lease, in byte order of the names: the held ones,
// and with includeFree also the expired and released ones with their last
// owner and token. Like Scan, it reads a page at a time and calls fn outside
// the handle's lock, and stops at fn's first error, returning it.
//
// Leases returns ErrInvalidArgument for a nil fn, ErrClosed after Close,
// and the errors of a failed read
// (ErrBusy, ErrIO, ErrCorrupt).
func (db *DB) Leases(ctx context.Context, includeFree bool, fn func(LeaseInfo) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil Leases callback", ErrInvalidArgument)
	}
	after := ""
	for {
		var page []LeaseInfo
		err := db.do(ctx, reading, func(now int64) (err error) {
			page, err = db.leasePage(ctx, after, includeFree, now)
			return err
		})
		if err != nil {
			return fmt.Errorf("leases: %w", err)
		}
		for _, l := range page {
			if err := fn(l); err != nil {
				return err
			}
		}
		if len(page) < scanPageRows {
			return nil
		}
		after = page[len(page)-1].Name
	}
}

// leasePage reads up to scanPageRows lease rows. Callers hold mu.
func (db *DB) leasePage(ctx context.Context, after string, free bool, now int64) ([]LeaseInfo, error) {
	rows, err := db.conn.QueryContext(ctx, leasesSQL, after, free, now, scanPageRows)
	if err != nil {
		return nil, classify(ctx, err)
	}
	defer rows.Close()
	var page []LeaseInfo
	for rows.Next() {
		var l LeaseInfo
		var at int64
		if err := rows.Scan(&l.Name, &l.Owner, &l.Token, &at); err != nil {
			return nil, classify(ctx, err)
		}
		switch {
		case at > now:
			l.Status = LeaseHeld
		case at == 0:
			l.Status = LeaseReleased
		default:
			l.Status = LeaseExpired
		}
		if at != 0 {
			l.Expires = time.UnixMilli(at)
			l.Left = time.Duration(at-now) * time.Millisecond
		}
		page = append(page, l)
	}
	return page, classify(ctx, rows.Err())
}

// Stats counts keys and leases and reads the file's schema version, size in
// pages and clock high-water mark, all in one read transaction.
//
// Stats returns ErrClosed after Close and the errors of a failed read
// (ErrBusy, ErrIO, ErrCorrupt).
func (db *DB) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := db.do(ctx, reading, func(now int64) error {
		return db.inReadTx(ctx, func() error { return db.stats(ctx, now, &s) })
	})
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	return s, nil
}

// stats fills s. Callers hold mu.
func (db *DB) stats(ctx context.Context, now int64, s *Stats) error {
	var hwm int64
	scans := []struct {
		query string
		args  []any
		dst   []any
	}{
		{`PRAGMA user_version`, nil, []any{&s.SchemaVersion}},
		{`PRAGMA page_size`, nil, []any{&s.PageSize}},
		{`PRAGMA page_count`, nil, []any{&s.Pages}},
		{`PRAGMA freelist_count`, nil, []any{&s.FreePages}},
		{hwmGetSQL, nil, []any{&hwm}},
		{statsKeysSQL, []any{now}, []any{&s.Keys, &s.KeysWithDeadline, &s.ExpiredKeys}},
		{statsLeasesSQL, []any{now}, []any{&s.Leases, &s.LeaseNames}},
	}
	for _, q := range scans {
		if err := db.conn.QueryRowContext(ctx, q.query, q.args...).Scan(q.dst...); err != nil {
			return classify(ctx, err)
		}
	}
	s.HighWater = time.UnixMilli(hwm)
	s.Now = time.UnixMilli(now)
	s.Wall = db.cfg.clock.Wall()
	if behind := s.HighWater.Sub(s.Wall) - HighWaterLead; behind > 0 {
		s.ClockBehind = behind
	}
	return nil
}

// inReadTx runs fn inside a deferred transaction, so every read in it sees
// one snapshot, and ends it without writing. Callers hold mu.
func (db *DB) inReadTx(ctx context.Context, fn func() error) error {
	if _, err := db.conn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		return classify(ctx, err)
	}
	err := fn()
	if _, rerr := db.conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`); rerr != nil && err == nil {
		err = classify(ctx, rerr)
	}
	return err
}

// Check verifies the file and returns what it found wrong, one finding a
// line, none for a sound file: SQLite's integrity_check; the identity and
// schema (every table and index exactly as this statekit creates them, so
// a lease name has one row and its token only grows); the meta row; and
// every row's invariants: keys are valid text, values are integers or blobs
// within MaxValueBytes, deadlines are integers and never negative, lease
// owners are non-empty text, tokens are at least 1. It stops after 100
// findings. Check only reads, so it is safe beside a running writer.
//
// Check returns an error, not findings, when it cannot read the file: ErrClosed
// after Close, ErrBusy, ErrIO, or ErrCorrupt when the damage stops a query.
func (db *DB) Check(ctx context.Context) ([]string, error) {
	want, err := expectedSchema(ctx)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	var findings []string
	err = db.do(ctx, reading, func(int64) error {
		return db.inReadTx(ctx, func() (err error) {
			findings, err = db.check(ctx, want)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
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
// most ?1 offending rows, a text naming the row (quote() of its key) and a
// text describing what is wrong.
type rowCheck struct {
	table, query string
}

// rowChecks are statekit's invariants on rows.
var rowChecks = []rowCheck{
	{"kv", `SELECT quote(key), 'key is ' || typeof(key) || ', not text' FROM kv WHERE typeof(key) <> 'text' LIMIT ?1`},
	{"kv", `SELECT quote(key), 'key is empty' FROM kv WHERE key = '' LIMIT ?1`},
	{"kv", `SELECT quote(key), 'key contains a NUL byte' FROM kv
WHERE typeof(key) = 'text' AND instr(CAST(key AS BLOB), X'00') > 0 LIMIT ?1`},
	{"kv", `SELECT quote(substr(key, 1, 40)), 'key is ' || length(CAST(key AS BLOB)) || ' bytes, over ' || ?2
FROM kv WHERE length(CAST(key AS BLOB)) > ?2 LIMIT ?1`},
	{"kv", `SELECT quote(key), 'value is ' || typeof(value) || ', not integer or blob' FROM kv
WHERE typeof(value) NOT IN ('integer', 'blob') LIMIT ?1`},
	{"kv", `SELECT quote(key), 'value is ' || length(value) || ' bytes, over ' || ?3 FROM kv
WHERE typeof(value) = 'blob' AND length(value) > ?3 LIMIT ?1`},
	{"kv", `SELECT quote(key), 'deadline is ' || typeof(expires_at) || ', not integer or null' FROM kv
WHERE typeof(expires_at) NOT IN ('integer', 'null') LIMIT ?1`},
	{"kv", `SELECT quote(key), 'deadline ' || expires_at || ' is negative' FROM kv
WHERE typeof(expires_at) = 'integer' AND expires_at < 0 LIMIT ?1`},
	{"leases", `SELECT quote(name), 'name is ' || typeof(name) || ', not text' FROM leases
WHERE typeof(name) <> 'text' LIMIT ?1`},
	{"leases", `SELECT quote(name), 'name is empty' FROM leases WHERE name = '' LIMIT ?1`},
	{"leases", `SELECT quote(name), 'owner is ' || typeof(owner) || ', not text' FROM leases
WHERE typeof(owner) <> 'text' LIMIT ?1`},
	{"leases", `SELECT quote(name), 'owner is empty' FROM leases WHERE owner = '' LIMIT ?1`},
	{"leases", `SELECT quote(name), 'token ' || quote(token) || ' is not an integer of at least 1' FROM leases
WHERE typeof(token) <> 'integer' OR token < 1 LIMIT ?1`},
	{"leases", `SELECT quote(name), 'deadline ' || quote(expires_at) || ' is not an integer of at least 0' FROM leases
WHERE typeof(expires_at) <> 'integer' OR expires_at < 0 LIMIT ?1`},
	{"meta", `SELECT quote(k), 'unknown meta row' FROM meta
WHERE k NOT IN ('hwm', 'handles', 'durable_commits') AND k NOT GLOB 'hwm:[0-9]*' LIMIT ?1`},
	{"meta", `SELECT quote(k), 'value ' || quote(v) || ' is not an integer of at least 0' FROM meta
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
		var row, what string
		if err := rows.Scan(&row, &what); err != nil {
			return classify(ctx, err)
		}
		f.add("%s %s: %s", c.table, row, what)
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
