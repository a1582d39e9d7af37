package verbtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// casCases: CAS, with and without TTL.
var casCases = []verbCase{
	{"cas/matching", func(t *testing.T, e *env) {
		steps := []struct {
			name          string
			setup         any // nil: key absent
			expected, new any
			swapped       bool
			after         string
		}{
			{"absent, expected nil, new v creates", nil, nil, "v", true, "bytes:v"},
			{"absent, expected nil, new nil checks absence", nil, nil, nil, true, "<absent>"},
			{"absent, expected v", nil, "v", "w", false, "<absent>"},
			{"absent, expected v, new nil", nil, "v", nil, false, "<absent>"},
			{"bytes equal", "a", "a", "b", true, "bytes:b"},
			{"bytes differ", "a", "x", "b", false, "bytes:a"},
			{"int equal", 7, 7, 8, true, "int:8"},
			{"int differ", 7, 8, 9, false, "int:7"},
			{"int64 vs int equal", 7, int64(7), "seven", true, "bytes:seven"},
			{"int 7 is not \"7\"", 7, "7", 8, false, "int:7"},
			{"int 7 is not []byte(\"7\")", 7, []byte("7"), 8, false, "int:7"},
			{"\"7\" is not int 7", "7", 7, 8, false, "bytes:7"},
			{"string equals []byte", "ab", []byte("ab"), 1, true, "int:1"},
			{"Value expected", 3, state.IntValue(3), state.BytesValue([]byte("x")), true, "bytes:x"},
			{"present, expected nil", "a", nil, "b", false, "bytes:a"},
			{"present, expected nil, new nil", "a", nil, nil, false, "bytes:a"},
			{"match, new nil deletes", "a", "a", nil, true, "<absent>"},
			{"int match, new nil deletes", 5, 5, nil, true, "<absent>"},
			{"no match, new nil keeps", "a", "b", nil, false, "bytes:a"},
			{"empty bytes match", "", []byte{}, "x", true, "bytes:x"},
			{"empty is not int 0", "", 0, "x", false, "bytes:"},
			{"int 0 is not empty", 0, "", "x", false, "int:0"},
			{"binary match", []byte{0, 255}, []byte{0, 255}, []byte{1}, true, "bytes:\x01"},
			{"prefix does not match", "abc", "ab", "x", false, "bytes:abc"},
		}
		for i, s := range steps {
			key := fmt.Sprintf("k%d", i)
			if s.setup != nil {
				e.set(key, s.setup)
			}
			ok, err := e.db.CAS(e.ctx, key, s.expected, s.new)
			require.NoError(t, err, s.name)
			assert.Equal(t, s.swapped, ok, s.name)
			assert.Equal(t, s.after, e.get(key), s.name)
			if s.after != "<absent>" {
				e.noExpiry(key, s.name)
			}
		}
	}},

	{"cas/deadlines", func(t *testing.T, e *env) {
		e.set("k", "a", state.TTL(time.Minute))
		ok, err := e.db.CAS(e.ctx, "k", "a", "b")
		require.NoError(t, err)
		require.True(t, ok)
		e.ttlWithin("k", time.Minute, "a swap without TTL keeps the deadline")
		ok, err = e.db.CAS(e.ctx, "k", "x", "c", state.TTL(time.Hour))
		require.NoError(t, err)
		assert.False(t, ok)
		e.ttlWithin("k", time.Minute, "a CAS that did not swap changes no deadline")
		ok, err = e.db.CAS(e.ctx, "k", "b", 7, state.TTL(time.Hour))
		require.NoError(t, err)
		require.True(t, ok)
		e.ttlWithin("k", time.Hour, "a swap with TTL sets the new deadline")
		assert.Equal(t, "int:7", e.get("k"))

		ok, err = e.db.CAS(e.ctx, "n", nil, "v")
		require.NoError(t, err)
		require.True(t, ok)
		e.noExpiry("n", "a key created by CAS without TTL has none")
		ok, err = e.db.CAS(e.ctx, "n", "v", "w")
		require.NoError(t, err)
		require.True(t, ok)
		e.noExpiry("n", "a swap without TTL keeps no deadline")
		ok, err = e.db.CAS(e.ctx, "n", "w", "z", state.TTL(time.Minute))
		require.NoError(t, err)
		require.True(t, ok)
		e.ttlWithin("n", time.Minute, "a swap with TTL gives a deadline to a key that had none")
	}},

	{"cas/create-with-ttl", func(t *testing.T, e *env) {
		ok, err := e.db.CAS(e.ctx, "k", nil, "seen", state.TTL(time.Minute))
		require.NoError(t, err)
		require.True(t, ok, "an absent key is created")
		e.ttlWithin("k", time.Minute, "with the TTL")
		ok, err = e.db.CAS(e.ctx, "k", nil, "again", state.TTL(time.Hour))
		require.NoError(t, err)
		assert.False(t, ok, "a live key is not created again")
		assert.Equal(t, "bytes:seen", e.get("k"))
		e.ttlWithin("k", time.Minute, "and keeps its deadline")

		ok, err = e.db.CAS(e.ctx, "i", nil, 42, state.TTL(time.Hour))
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "int:42", e.get("i"), "an integer created by CAS")
		e.ttlWithin("i", time.Hour, "with the TTL")
	}},

	{"cas/bad-input", func(t *testing.T, e *env) {
		e.set("k", "a")
		calls := []struct {
			name string
			do   func() (bool, error)
			want error
		}{
			{"ttl 0", func() (bool, error) { return e.db.CAS(e.ctx, "k", "a", "b", state.TTL(0)) }, state.ErrInvalidTTL},
			{"ttl negative", func() (bool, error) { return e.db.CAS(e.ctx, "k", "a", "b", state.TTL(-time.Second)) }, state.ErrInvalidTTL},
			{"ttl on a delete", func() (bool, error) { return e.db.CAS(e.ctx, "k", "a", nil, state.TTL(time.Second)) }, state.ErrInvalidArgument},
			{"ttl on an absence check", func() (bool, error) { return e.db.CAS(e.ctx, "k", nil, nil, state.TTL(time.Second)) }, state.ErrInvalidArgument},
			{"ttl on an absence check, absent key", func() (bool, error) { return e.db.CAS(e.ctx, "x", nil, nil, state.TTL(time.Second)) }, state.ErrInvalidArgument},
			{"float expected", func() (bool, error) { return e.db.CAS(e.ctx, "k", 1.5, "b") }, state.ErrInvalidValue},
			{"bool new", func() (bool, error) { return e.db.CAS(e.ctx, "k", "a", true) }, state.ErrInvalidValue},
			{"struct new on absent", func() (bool, error) { return e.db.CAS(e.ctx, "x", nil, struct{}{}) }, state.ErrInvalidValue},
			{"too long new", func() (bool, error) { return e.db.CAS(e.ctx, "k", "a", make([]byte, maxValueBytes+1)) }, state.ErrInvalidValue},
			{"empty key", func() (bool, error) { return e.db.CAS(e.ctx, "", nil, 1) }, state.ErrInvalidKey},
		}
		for _, c := range calls {
			ok, err := c.do()
			assert.ErrorIs(t, err, c.want, c.name)
			assert.False(t, ok, c.name)
			if strings.HasPrefix(c.name, "float") || strings.HasPrefix(c.name, "bool") || strings.HasPrefix(c.name, "struct") {
				assert.ErrorContains(t, err, "want int, int64, string, []byte or state.Value", "%s: names every type CAS takes", c.name)
			}
		}
		assert.Equal(t, "bytes:a", e.get("k"), "refused input changes nothing")
		e.noExpiry("k", "refused input gives no deadline")
		assert.Equal(t, "<absent>", e.get("x"))
	}},
}
