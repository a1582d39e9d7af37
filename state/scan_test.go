package state_test

import (
	"context"
	"errors"
	"fmt"
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

// TestScanFindsAKeyExpiredAtItsDeadline: Scan judges expiry as every verb
// does: a key is live until the millisecond before its deadline and
// expired at it, left out without includeExpired and marked with it.
func TestScanFindsAKeyExpiredAtItsDeadline(t *testing.T) {
	f := newFixture(t, backends[0])
	require.NoError(t, f.db.Set(f.ctx, "k", "v", state.TTL(time.Second)))
	f.clock.Advance(time.Second - time.Millisecond)
	assert.Equal(t, []string{"k=bytes:v@1ms"}, scanAll(t, f.db, "", false), "live a millisecond before")
	assert.Equal(t, []string{"k=bytes:v@1ms"}, scanAll(t, f.db, "", true), "not marked a millisecond before")
	f.clock.Advance(time.Millisecond)
	assert.Empty(t, scanAll(t, f.db, "", false), "absent at its deadline")
	assert.Equal(t, []string{"k=bytes:v@0s expired"}, scanAll(t, f.db, "", true), "marked at its deadline")
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
