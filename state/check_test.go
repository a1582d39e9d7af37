package state_test

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckFindsNothingInASoundFile(t *testing.T) {
	f := newFixture(t, backends[0])
	require.NoError(t, f.db.Set(f.ctx, "k", "v", state.TTL(time.Second)))
	_, err := f.db.Incr(f.ctx, "n")
	require.NoError(t, err)
	l, err := f.db.Lease(f.ctx, "job", "a", time.Second)
	require.NoError(t, err)
	require.NoError(t, f.db.Release(f.ctx, l))
	f.clock.Advance(5 * time.Second)

	findings, err := f.db.Check(f.ctx)
	require.NoError(t, err)
	assert.Empty(t, findings)

	ro := f.open(state.WithReadOnly())
	defer ro.Close()
	findings, err = ro.Check(f.ctx)
	require.NoError(t, err)
	assert.Empty(t, findings, "Check runs on a read-only handle")
}

func TestCheckFindsBrokenInvariants(t *testing.T) {
	cases := []struct {
		name, sql, want string
	}{
		{"negative key deadline", `UPDATE kv SET expires_at = -5 WHERE key = 'k'`, `kv 'k': deadline -5 is negative`},
		{"real value", `INSERT INTO kv(key, value) VALUES ('f', 1.5)`, `kv 'f': value is real, not integer or blob`},
		{"text value", `INSERT INTO kv(key, value) VALUES ('t', 'text')`, `kv 't': value is text, not integer or blob`},
		{"blob key", `INSERT INTO kv(key, value) VALUES (X'6b00', 1)`, `kv X'6B00': key is blob, not text`},
		{"empty key", `INSERT INTO kv(key, value) VALUES ('', 1)`, `kv '': key is empty`},
		{"NUL in a key", `INSERT INTO kv(key, value) VALUES (CAST(X'610062' AS TEXT), 1)`, `kv "a\x00b": key contains a NUL byte`},
		{"text value under a NUL key", `INSERT INTO kv(key, value) VALUES (CAST(X'610062' AS TEXT), 'text')`, `kv "a\x00b": value is text, not integer or blob`},
		{"text value under a quote", `INSERT INTO kv(key, value) VALUES ('it''s', 'text')`, `kv 'it''s': value is text, not integer or blob`},
		{"key not UTF-8", `INSERT INTO kv(key, value) VALUES (CAST(X'61FF62' AS TEXT), 1)`, `kv "a\xffb": key is not valid UTF-8`},
		{"NUL in a lease name", `UPDATE leases SET name = CAST(X'6A006F' AS TEXT)`, `leases "j\x00o": name contains a NUL byte`},
		{"lease name not UTF-8", `UPDATE leases SET name = CAST(X'6AFF6F' AS TEXT)`, `leases "j\xffo": name is not valid UTF-8`},
		{"text deadline", `UPDATE kv SET expires_at = 'soon' WHERE key = 'k'`, `kv 'k': deadline is text, not integer or null`},
		{"token zero", `UPDATE leases SET token = 0`, `leases 'job': token 0 is not an integer of at least 1`},
		{"negative lease deadline", `UPDATE leases SET expires_at = -1`, `leases 'job': deadline -1 is not an integer of at least 0`},
		{"empty owner", `UPDATE leases SET owner = ''`, `leases 'job': owner is empty`},
		{"no high-water mark", `DELETE FROM meta`, `meta: the high-water mark row is missing`},
		{"foreign meta row", `INSERT INTO meta VALUES ('x', 1)`, `meta 'x': unknown meta row`},
		{"index dropped", `DROP INDEX kv_expires`, `schema: index kv_expires is missing`},
		{"extra table", `CREATE TABLE extra(x)`, `schema: unexpected table extra`},
		{"table changed", `DROP TABLE leases;
CREATE TABLE leases(name TEXT PRIMARY KEY, owner TEXT NOT NULL, token INTEGER NOT NULL, expires_at INTEGER NOT NULL)`,
			`schema: table leases is "CREATE TABLE leases(name TEXT PRIMARY KEY, owner TEXT NOT NULL, token INTEGER NOT NULL, expires_at INTEGER NOT NULL)", want "CREATE TABLE leases ( name TEXT PRIMARY KEY, owner TEXT NOT NULL, token INTEGER NOT NULL, expires_at INTEGER NOT NULL ) WITHOUT ROWID"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, backends[0])
			require.NoError(t, f.db.Set(f.ctx, "k", "v", state.TTL(time.Hour)))
			_, err := f.db.Lease(f.ctx, "job", "a", time.Hour)
			require.NoError(t, err)
			require.NoError(t, f.db.Close())
			rawExec(t, f.path, c.sql)

			db := f.open(state.WithReadOnly())
			defer db.Close()
			findings, err := db.Check(f.ctx)
			require.NoError(t, err)
			require.NotEmpty(t, findings)
			assert.Contains(t, findings[0], c.want, "all findings: %q", findings)
		})
	}
}

func TestCheckStopsAtAHundredFindings(t *testing.T) {
	f := newFixture(t, backends[0])
	require.NoError(t, f.db.Close())
	rawExec(t, f.path, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
INSERT INTO kv(key, value, expires_at) SELECT 'k' || i, 1.5, -i FROM n`)
	db := f.open(state.WithReadOnly())
	defer db.Close()
	findings, err := db.Check(f.ctx)
	require.NoError(t, err)
	assert.Len(t, findings, 100)
}

func TestCheckFindsDamagedPages(t *testing.T) {
	f := newFixture(t, backends[0])
	require.NoError(t, f.db.Update(f.ctx, func(tx *state.Tx) error {
		for i := range 2000 {
			if err := tx.Set(fmt.Sprintf("key%05d", i), fmt.Sprintf("%0100d", i)); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, f.db.Close()) // the last close checkpoints the WAL into the file

	raw, err := os.ReadFile(f.path)
	require.NoError(t, err)
	pageSize := int(raw[16])<<8 | int(raw[17])
	require.Greater(t, len(raw), 20*pageSize, "enough pages to damage one in the middle")
	page := raw[10*pageSize : 11*pageSize]
	for i := 8; i < len(page); i += 3 { // keep the page type, scramble the rest
		page[i] ^= 0x5a
	}
	require.NoError(t, os.WriteFile(f.path, raw, 0o600))

	db := f.open(state.WithReadOnly())
	defer db.Close()
	findings, err := db.Check(f.ctx)
	require.NoError(t, err, "damage integrity_check can describe is findings, not an error")
	require.NotEmpty(t, findings)
	for _, line := range findings {
		assert.True(t, strings.HasPrefix(line, "integrity_check: "), "only integrity_check reports: %q", line)
	}
	assert.Contains(t, findings[0], "Tree ", "one finding a line")
}

// rawExec runs query on the file through plain SQLite, as a user of the
// sqlite3 shell would.
func rawExec(t *testing.T, path, query string) {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer raw.Close()
	_, err = raw.Exec(query)
	require.NoError(t, err)
}
