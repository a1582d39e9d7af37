package state_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scanAll collects what Scan reports as "key=type:value@left" lines.
func scanAll(t *testing.T, db *state.DB, prefix string, expired bool) []string {
	t.Helper()
	var got []string
	err := db.Scan(context.Background(), prefix, expired, func(k state.KeyInfo) error {
		typ := "bytes"
		if k.Value.IsInt() {
			typ = "int"
		}
		line := fmt.Sprintf("%s=%s:%s@%v", k.Key, typ, k.Value, k.Left)
		if k.Expired {
			line += " expired"
		}
		got = append(got, line)
		return nil
	})
	require.NoError(t, err)
	return got
}

func TestScanReportsKeysDeadlinesAndExpiredRows(t *testing.T) {
	f := newFixture(t, backends[0])
	require.NoError(t, f.db.Set(f.ctx, "b:1", "one"))
	require.NoError(t, f.db.Set(f.ctx, "b:2", 2, state.TTL(10*time.Second)))
	require.NoError(t, f.db.Set(f.ctx, "b:3", "gone", state.TTL(time.Second)))
	require.NoError(t, f.db.Set(f.ctx, "a", "first"))
	require.NoError(t, f.db.Set(f.ctx, "c", "last"))
	f.clock.Advance(2 * time.Second)

	assert.Equal(t, []string{"a=bytes:first@-1ns", "b:1=bytes:one@-1ns", "b:2=int:2@8s", "c=bytes:last@-1ns"},
		scanAll(t, f.db, "", false), "live keys in key order, NoExpiry without a deadline")
	assert.Equal(t, []string{"b:1=bytes:one@-1ns", "b:2=int:2@8s"}, scanAll(t, f.db, "b:", false))
	assert.Equal(t, []string{"b:1=bytes:one@-1ns", "b:2=int:2@8s", "b:3=bytes:gone@-1s expired"},
		scanAll(t, f.db, "b:", true), "includeExpired shows the unswept row, marked")
	assert.Empty(t, scanAll(t, f.db, "zz", true))

	var k state.KeyInfo
	require.NoError(t, f.db.Scan(f.ctx, "b:2", false, func(ki state.KeyInfo) error { k = ki; return nil }))
	assert.Equal(t, f.nowMillis()+8000, k.Expires.UnixMilli(), "Expires is the deadline")
}

func TestScanPrefixBoundsAreBytes(t *testing.T) {
	f := newFixture(t, backends[0])
	// "¿" is C2 BF: the bound past it, C2 C0, is not valid UTF-8.
	for _, k := range []string{"a", "¿", "¿x", "À", "Á", "é", "éa", "ê"} {
		require.NoError(t, f.db.Set(f.ctx, k, 1))
	}
	assert.Equal(t, []string{"¿=int:1@-1ns", "¿x=int:1@-1ns"}, scanAll(t, f.db, "¿", false))
	assert.Equal(t, []string{"é=int:1@-1ns", "éa=int:1@-1ns"}, scanAll(t, f.db, "é", false))
	assert.Len(t, scanAll(t, f.db, "", false), 8)
}

func TestScanPagesWithoutHoldingTheLock(t *testing.T) {
	f := newFixture(t, backends[0])
	const n = 700 // more than two pages
	require.NoError(t, f.db.Update(f.ctx, func(tx *state.Tx) error {
		for i := range n {
			if err := tx.Set(fmt.Sprintf("k%04d", i), i); err != nil {
				return err
			}
		}
		return nil
	}))
	seen := 0
	err := f.db.Scan(f.ctx, "k", false, func(k state.KeyInfo) error {
		require.Equal(t, fmt.Sprintf("k%04d", seen), k.Key, "each key once, in order")
		// The callback may use the handle: Scan does not hold its lock.
		v, err := f.db.Get(f.ctx, k.Key)
		require.NoError(t, err)
		require.True(t, v.Equal(k.Value))
		seen++
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, n, seen)

	stop := errors.New("stop")
	calls := 0
	err = f.db.Scan(f.ctx, "", false, func(state.KeyInfo) error { calls++; return stop })
	assert.ErrorIs(t, err, stop, "the callback's error ends the scan")
	assert.Equal(t, 1, calls)
	assert.ErrorIs(t, f.db.Scan(f.ctx, "", false, nil), state.ErrInvalidArgument)
}

func TestScanNamesAForeignValueAndKeepsTheHandle(t *testing.T) {
	f := newFixture(t, backends[0])
	require.NoError(t, f.db.Set(f.ctx, "good", "v"))
	require.NoError(t, f.db.Close())
	rawExec(t, f.path, `INSERT INTO kv(key, value) VALUES ('float', 1.5)`)

	db := f.open(state.WithReadOnly())
	defer db.Close()
	err := db.Scan(f.ctx, "", false, func(state.KeyInfo) error { return nil })
	assert.ErrorIs(t, err, state.ErrCorrupt)
	assert.ErrorContains(t, err, `"float"`)
	_, err = db.Get(f.ctx, "good")
	assert.NoError(t, err, "a strange row does not end the handle")
}

func TestLeasesReportsHeldExpiredAndReleased(t *testing.T) {
	f := newFixture(t, backends[0])
	held, err := f.db.Lease(f.ctx, "held", "a", 10*time.Second)
	require.NoError(t, err)
	_, err = f.db.Lease(f.ctx, "expired", "b", time.Second)
	require.NoError(t, err)
	rel, err := f.db.Lease(f.ctx, "released", "c", time.Second)
	require.NoError(t, err)
	require.NoError(t, f.db.Release(f.ctx, rel))
	rel2, err := f.db.Lease(f.ctx, "released", "d", time.Second)
	require.NoError(t, err)
	require.NoError(t, f.db.Release(f.ctx, rel2))
	f.clock.Advance(3 * time.Second)

	list := func(free bool) []string {
		var got []string
		require.NoError(t, f.db.Leases(f.ctx, free, func(l state.LeaseInfo) error {
			got = append(got, fmt.Sprintf("%s %s %d %v %v", l.Name, l.Owner, l.Token, l.Status, l.Left))
			return nil
		}))
		return got
	}
	assert.Equal(t, []string{"held a 1 held 7s"}, list(false))
	assert.Equal(t, []string{"expired b 1 expired -2s", "held a 1 held 7s", "released d 2 released 0s"}, list(true),
		"free leases keep their last owner and token")

	var l state.LeaseInfo
	require.NoError(t, f.db.Leases(f.ctx, false, func(li state.LeaseInfo) error { l = li; return nil }))
	assert.Equal(t, held.Expires, l.Expires)
	assert.ErrorIs(t, f.db.Leases(f.ctx, true, nil), state.ErrInvalidArgument)
}

func TestLeasesPages(t *testing.T) {
	f := newFixture(t, backends[0])
	const n = 300
	for i := range n {
		_, err := f.db.Lease(f.ctx, fmt.Sprintf("job%03d", i), "a", time.Minute)
		require.NoError(t, err)
	}
	var names []string
	require.NoError(t, f.db.Leases(f.ctx, false, func(l state.LeaseInfo) error {
		names = append(names, l.Name)
		return nil
	}))
	require.Len(t, names, n)
	assert.Equal(t, "job000", names[0])
	assert.Equal(t, "job299", names[n-1])
}

func TestStats(t *testing.T) {
	f := newFixture(t, backends[0])
	require.NoError(t, f.db.Set(f.ctx, "plain", "v"))
	require.NoError(t, f.db.Set(f.ctx, "ttl", "v", state.TTL(time.Minute)))
	require.NoError(t, f.db.Set(f.ctx, "old", "v", state.TTL(time.Second)))
	_, err := f.db.Lease(f.ctx, "held", "a", time.Minute)
	require.NoError(t, err)
	_, err = f.db.Lease(f.ctx, "lapsed", "a", time.Second)
	require.NoError(t, err)
	f.clock.Advance(2 * time.Second)

	s, err := f.db.Stats(f.ctx)
	require.NoError(t, err)
	assert.Equal(t, state.SchemaVersion, s.SchemaVersion)
	assert.Equal(t, int64(2), s.Keys)
	assert.Equal(t, int64(1), s.KeysWithDeadline)
	assert.Equal(t, int64(1), s.ExpiredKeys)
	assert.Equal(t, int64(1), s.Leases)
	assert.Equal(t, int64(2), s.LeaseNames)
	assert.Positive(t, s.Pages)
	assert.Positive(t, s.PageSize)
	assert.Equal(t, f.db.Now(), s.Now)
	assert.False(t, s.HighWater.Before(s.Now), "the mark is at or after every time used")
	assert.Zero(t, s.ClockBehind, "a sane clock")

	// A new process whose wall clock stepped an hour back.
	require.NoError(t, f.db.Close())
	f.clock = f.clock.Restart()
	f.clock.StepWall(-time.Hour)
	db := f.open(state.WithReadOnly())
	defer db.Close()
	s2, err := db.Stats(f.ctx)
	require.NoError(t, err)
	assert.Equal(t, s.Now, s2.HighWater, "a clean close leaves the exact latest time used as the mark")
	f.clock.Advance(time.Hour)
	s3, err := db.Stats(f.ctx)
	require.NoError(t, err)
	assert.Equal(t, s2.HighWater, s3.HighWater, "a read-only handle never advances the mark")
	assert.Equal(t, s2.HighWater.Sub(s2.Wall)-state.HighWaterLead, s2.ClockBehind)
	assert.Greater(t, s2.ClockBehind, 59*time.Minute)
	assert.Equal(t, s2.HighWater, s2.Now, "the engine counts from the mark")
}

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
