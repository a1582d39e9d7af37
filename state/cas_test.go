package state_test

import (
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCAS(t *testing.T) {
	type step struct {
		name          string
		setup         any // nil: key absent
		expected, new any
		swapped       bool
		after         string
	}
	steps := []step{
		{"absent, expected nil, new v", nil, nil, "v", true, "bytes:v"},
		{"absent, expected nil, new nil", nil, nil, nil, true, "<absent>"},
		{"absent, expected v", nil, "v", "w", false, "<absent>"},
		{"bytes equal", "a", "a", "b", true, "bytes:b"},
		{"bytes differ", "a", "x", "b", false, "bytes:a"},
		{"int equal", 7, 7, 8, true, "int:8"},
		{"int64 vs int equal", 7, int64(7), "seven", true, "bytes:seven"},
		{"int 7 is not \"7\"", 7, "7", 8, false, "int:7"},
		{"\"7\" is not int 7", "7", 7, 8, false, "bytes:7"},
		{"string equals []byte", "ab", []byte("ab"), 1, true, "int:1"},
		{"present, expected nil", "a", nil, "b", false, "bytes:a"},
		{"match, new nil deletes", "a", "a", nil, true, "<absent>"},
		{"no match, new nil keeps", "a", "b", nil, false, "bytes:a"},
		{"empty bytes match", "", []byte{}, "x", true, "bytes:x"},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		for _, s := range steps {
			_, err := f.db.Del(f.ctx, "k")
			require.NoError(t, err)
			if s.setup != nil {
				require.NoError(t, f.db.Set(f.ctx, "k", s.setup))
			}
			ok, err := f.db.CAS(f.ctx, "k", s.expected, s.new)
			require.NoError(t, err, s.name)
			assert.Equal(t, s.swapped, ok, s.name)
			assert.Equal(t, s.after, f.get("k"), s.name)
		}
	})
}

func TestCASDeadlines(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "k", "a", state.TTL(time.Second)))
		ok, err := f.db.CAS(f.ctx, "k", "a", "b")
		require.NoError(t, err)
		require.True(t, ok)
		left, err := f.db.TTL(f.ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, time.Second, left, "a swap keeps the deadline")

		f.clock.Advance(time.Second)
		ok, err = f.db.CAS(f.ctx, "k", "b", "c")
		require.NoError(t, err)
		assert.False(t, ok, "an expired value never matches")
		ok, err = f.db.CAS(f.ctx, "k", nil, "new")
		require.NoError(t, err)
		assert.True(t, ok, "an expired key matches nil")
		left, err = f.db.TTL(f.ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, state.NoExpiry, left, "a key created by CAS has no deadline")
	})
}

// TestCASFindsAKeyAbsentAtItsDeadline: at its deadline's millisecond a
// key is absent to every form of CAS, in one Update as on its own: the
// check that it is absent (nil, nil), a delete and a swap with a TTL of
// the value it held never match it.
func TestCASFindsAKeyAbsentAtItsDeadline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		for _, inTx := range []bool{false, true} {
			cas := func(expected, new any, opts ...state.WriteOption) bool {
				t.Helper()
				var ok bool
				var err error
				if inTx {
					err = f.db.Update(f.ctx, func(tx *state.Tx) error {
						ok, err = tx.CAS("k", expected, new, opts...)
						return err
					})
				} else {
					ok, err = f.db.CAS(f.ctx, "k", expected, new, opts...)
				}
				require.NoError(t, err)
				return ok
			}
			require.NoError(t, f.db.Set(f.ctx, "k", "a", state.TTL(time.Second)))
			f.clock.Advance(time.Second - time.Millisecond)
			assert.False(t, cas(nil, nil), "in tx %v: live a millisecond before its deadline", inTx)
			f.clock.Advance(time.Millisecond)
			assert.True(t, cas(nil, nil), "in tx %v: absent at its deadline", inTx)
			assert.False(t, cas("a", nil), "in tx %v: an expired value is never deleted by CAS", inTx)
			assert.False(t, cas("a", "b", state.TTL(time.Hour)), "in tx %v: nor swapped with a TTL", inTx)
			assert.Equal(t, "<absent>", f.get("k"), "in tx %v", inTx)
		}
	})
}

func TestCASBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		_, err := f.db.CAS(f.ctx, "k", 1.5, 1)
		assert.ErrorIs(t, err, state.ErrInvalidValue)
		_, err = f.db.CAS(f.ctx, "k", nil, true)
		assert.ErrorIs(t, err, state.ErrInvalidValue)
		_, err = f.db.CAS(f.ctx, "", nil, 1)
		assert.ErrorIs(t, err, state.ErrInvalidKey)
		assert.Equal(t, "<absent>", f.get("k"))
	})
}
