package verbtest

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kvCases: Get, Set, Del and the Value a store gives back.
var kvCases = []verbCase{
	{"set-get/types", func(t *testing.T, e *env) {
		cases := []struct {
			key   string
			value any
			want  string
		}{
			{"int", 7, "int:7"},
			{"int64", int64(7), "int:7"},
			{"int negative", -12, "int:-12"},
			{"int64 max", int64(math.MaxInt64), "int:9223372036854775807"},
			{"int64 min", int64(math.MinInt64), "int:-9223372036854775808"},
			{"zero", 0, "int:0"},
			{"string", "hello", "bytes:hello"},
			{"numeric string stays bytes", "7", "bytes:7"},
			{"numeric bytes stay bytes", []byte("7"), "bytes:7"},
			{"negative numeric string", "-12", "bytes:-12"},
			{"binary bytes", []byte{0, 1, 2, 255}, "bytes:\x00\x01\x02\xff"},
			{"empty string", "", "bytes:"},
			{"empty bytes", []byte{}, "bytes:"},
			{"int Value", state.IntValue(3), "int:3"},
			{"bytes Value", state.BytesValue([]byte("3")), "bytes:3"},
			{"utf-8 text", "héllo, 世界", "bytes:héllo, 世界"},
		}
		for _, c := range cases {
			require.NoError(t, e.db.Set(e.ctx, c.key, c.value), c.key)
		}
		for _, c := range cases {
			assert.Equal(t, c.want, e.get(c.key), c.key)
		}
	}},

	{"set-get/value-accessors-and-equal", func(t *testing.T, e *env) {
		e.set("i", 7)
		e.set("s", "7")
		e.set("b", []byte("7"))
		vi, err := e.db.Get(e.ctx, "i")
		require.NoError(t, err)
		vs, err := e.db.Get(e.ctx, "s")
		require.NoError(t, err)
		vb, err := e.db.Get(e.ctx, "b")
		require.NoError(t, err)

		n, ok := vi.Int()
		assert.True(t, ok)
		assert.Equal(t, int64(7), n)
		assert.True(t, vi.IsInt())
		assert.Equal(t, "7", vi.String())
		assert.Equal(t, []byte("7"), vi.Bytes(), "an integer's Bytes are its decimal text")

		for name, v := range map[string]state.Value{"string": vs, "bytes": vb} {
			_, ok := v.Int()
			assert.False(t, ok, "%s: bytes are never parsed as a number", name)
			assert.False(t, v.IsInt(), name)
			assert.Equal(t, "7", v.String(), name)
			assert.Equal(t, []byte("7"), v.Bytes(), name)
		}

		assert.True(t, vi.Equal(state.IntValue(7)))
		assert.False(t, vi.Equal(vs), "int 7 is not \"7\"")
		assert.False(t, vs.Equal(vi), "\"7\" is not int 7")
		assert.True(t, vs.Equal(vb), "a string and []byte of the same content are the same bytes")
		assert.True(t, vb.Equal(state.BytesValue([]byte("7"))))
		assert.False(t, vi.Equal(state.IntValue(8)))
		assert.False(t, vs.Equal(state.BytesValue([]byte("8"))))
	}},

	{"set-get/limits", func(t *testing.T, e *env) {
		long := stringOf('k', maxKeyBytes)
		e.set(long, 1)
		assert.Equal(t, "int:1", e.get(long), "a key at MaxKeyBytes is fine")

		big := make([]byte, maxValueBytes)
		for i := range big {
			big[i] = byte(i % 251)
		}
		e.set("big", big)
		v, err := e.db.Get(e.ctx, "big")
		require.NoError(t, err)
		assert.False(t, v.IsInt())
		assert.Equal(t, big, v.Bytes(), "a value at MaxValueBytes comes back whole")
	}},

	{"set-get/keys-of-any-text", func(t *testing.T, e *env) {
		keys := []string{" ", "a b", "line\nbreak", "tab\t", "{tag}", "{tag}x", "a:b:c", "*", "?", "[x]",
			"\\", "\"quoted\"", "\x01", "\x7f", "emoji 🙂", "日本", "-1", "0", "nil", "key\r\n"}
		for i, k := range keys {
			e.set(k, i)
		}
		for i, k := range keys {
			assert.Equal(t, fmt.Sprintf("int:%d", i), e.get(k), "key %q", k)
			e.noExpiry(k, fmt.Sprintf("key %q", k))
		}
		got := e.scanKeys("", false)
		assert.Len(t, got, len(keys))
		assert.IsIncreasing(t, got, "byte order")
		n, err := e.db.Del(e.ctx, keys...)
		require.NoError(t, err)
		assert.Equal(t, len(keys), n)
		e.empty("every key deleted")
	}},

	{"set-get/keys-and-leases-are-apart", func(t *testing.T, e *env) {
		e.set("job", "a key named like the lease")
		l := e.lease("job", "a", time.Hour)
		assert.Equal(t, int64(1), l.Token, "a key of the same name is not a lease")
		assert.Equal(t, "bytes:a key named like the lease", e.get("job"), "a grant leaves the key alone")
		assert.Equal(t, []string{"job"}, e.scanKeys("", true), "Scan lists keys, not leases")
		ls := e.leases(true)
		require.Len(t, ls, 1, "Leases lists leases, not keys")
		assert.Equal(t, "job", ls[0].Name)

		n, err := e.db.Del(e.ctx, "job")
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		_, err = e.db.Lease(e.ctx, "job", "b", time.Minute)
		assert.ErrorIs(t, err, state.ErrLeaseHeld, "Del of a key does not end a lease of that name")
		ok, err := e.db.Expire(e.ctx, "job", 0)
		require.NoError(t, err)
		assert.False(t, ok, "Expire sees no key named like the lease")
		_, err = e.db.Incr(e.ctx, "job")
		require.NoError(t, err)
		require.NoError(t, e.db.Renew(e.ctx, l, time.Hour), "Incr of a key does not touch a lease")
		s, err := e.db.Stats(e.ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), s.Keys)
		assert.Equal(t, int64(1), s.Leases)
		require.NoError(t, e.db.Release(e.ctx, l))
		assert.Equal(t, "int:1", e.get("job"), "a release leaves the key alone")
	}},

	{"get/missing", func(t *testing.T, e *env) {
		_, err := e.db.Get(e.ctx, "nope")
		assert.ErrorIs(t, err, state.ErrNotFound)
		assert.ErrorContains(t, err, `get "nope"`)
	}},

	{"set/replaces-type-and-drops-deadline", func(t *testing.T, e *env) {
		e.set("k", "text", state.TTL(time.Minute))
		e.ttlWithin("k", time.Minute, "Set with TTL")
		e.set("k", 5)
		assert.Equal(t, "int:5", e.get("k"), "Set replaces the type")
		e.noExpiry("k", "Set without TTL drops the old deadline")

		e.set("k", "x", state.TTL(time.Hour))
		assert.Equal(t, "bytes:x", e.get("k"))
		e.ttlWithin("k", time.Hour, "Set with TTL gives the new deadline")
		e.set("k", []byte("y"), state.TTL(time.Minute))
		e.ttlWithin("k", time.Minute, "Set with a shorter TTL replaces a longer one")
		e.set("k", 9)
		e.noExpiry("k", "and Set without TTL drops it again")
		assert.Equal(t, "int:9", e.get("k"))
	}},

	{"set/ttl-rounds-up", func(t *testing.T, e *env) {
		// A TTL under a millisecond is rounded up, never down to "none"
		// or to an error.
		since := time.Now()
		e.set("k", "v", state.TTL(time.Nanosecond))
		left, err := e.db.TTL(e.ctx, "k")
		if err == nil {
			assert.Greater(t, left, time.Duration(0), "a 1 ns TTL is a deadline, not none")
			assert.LessOrEqual(t, left, time.Millisecond)
		} else {
			assert.ErrorIs(t, err, state.ErrNotFound, "gone already: its millisecond passed")
		}
		e.waitAbsent("k", since, 0)
	}},

	{"del/counts-live-keys", func(t *testing.T, e *env) {
		for _, k := range []string{"a", "b", "c", "d"} {
			e.set(k, k)
		}
		cases := []struct {
			keys []string
			want int
		}{
			{nil, 0},
			{[]string{"missing"}, 0},
			{[]string{"a"}, 1},
			{[]string{"a"}, 0},
			{[]string{"b", "b"}, 1},
			{[]string{"c", "c", "missing", "c"}, 1},
		}
		for _, c := range cases {
			n, err := e.db.Del(e.ctx, c.keys...)
			require.NoError(t, err, "Del(%q)", c.keys)
			assert.Equal(t, c.want, n, "Del(%q)", c.keys)
		}
		for _, k := range []string{"a", "b", "c"} {
			assert.Equal(t, "<absent>", e.get(k))
		}
		assert.Equal(t, "bytes:d", e.get("d"), "a key not named is kept")
	}},

	{"del/many-keys", func(t *testing.T, e *env) {
		const n = 10000
		keys := make([]string, 0, n)
		for i := range n {
			keys = append(keys, fmt.Sprintf("k%05d", i))
		}
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error {
			for i := 0; i < n; i += 2 {
				if err := tx.Set(keys[i], i); err != nil {
					return err
				}
			}
			return nil
		}))
		got, err := e.db.Del(e.ctx, keys...)
		require.NoError(t, err)
		assert.Equal(t, n/2, got, "Del of %d keys, every other one live", n)
		assert.Empty(t, e.scanKeys("", true), "every key deleted")
	}},

	{"del/keeps-deadlines-of-others", func(t *testing.T, e *env) {
		e.set("a", 1, state.TTL(time.Hour))
		e.set("b", 2)
		n, err := e.db.Del(e.ctx, "b")
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		e.ttlWithin("a", time.Hour, "another key's deadline is untouched")
		e.set("b", 3)
		e.noExpiry("b", "a deleted key comes back without a deadline")
	}},
}
