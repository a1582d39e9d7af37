package state_test

import (
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSetGetTypes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		cases := []struct {
			name  string
			value any
			want  string
		}{
			{"int", 7, "int:7"},
			{"int64 max", int64(9223372036854775807), "int:9223372036854775807"},
			{"int64 min", int64(-9223372036854775808), "int:-9223372036854775808"},
			{"string", "hello", "bytes:hello"},
			{"numeric string stays bytes", "42", "bytes:42"},
			{"bytes", []byte{0, 1, 2, 255}, "bytes:\x00\x01\x02\xff"},
			{"empty string", "", "bytes:"},
			{"empty bytes", []byte{}, "bytes:"},
			{"value", state.IntValue(3), "int:3"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				require.NoError(t, f.db.Set(f.ctx, "k", c.value))
				assert.Equal(t, c.want, f.get("k"))
			})
		}
	})
}

func TestValueAccessors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "n", -12))
		v, err := f.db.Get(f.ctx, "n")
		require.NoError(t, err)
		n, ok := v.Int()
		assert.True(t, ok)
		assert.Equal(t, int64(-12), n)
		assert.Equal(t, "-12", v.String())
		assert.Equal(t, []byte("-12"), v.Bytes())

		require.NoError(t, f.db.Set(f.ctx, "s", "-12"))
		v, err = f.db.Get(f.ctx, "s")
		require.NoError(t, err)
		_, ok = v.Int()
		assert.False(t, ok, "bytes are never parsed as a number")
		assert.False(t, v.Equal(state.IntValue(-12)))
		assert.True(t, v.Equal(state.BytesValue([]byte("-12"))))
	})
}

func TestGetMissing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		_, err := f.db.Get(f.ctx, "nope")
		assert.ErrorIs(t, err, state.ErrNotFound)
	})
}

func TestSetReplacesTypeAndDropsTTL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "k", "text", state.TTL(time.Second)))
		require.NoError(t, f.db.Set(f.ctx, "k", 5))
		assert.Equal(t, "int:5", f.get("k"))
		left, err := f.db.TTL(f.ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, state.NoExpiry, left, "Set without TTL drops the old deadline")

		require.NoError(t, f.db.Set(f.ctx, "k", "x", state.TTL(1500*time.Millisecond)))
		left, err = f.db.TTL(f.ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, 1500*time.Millisecond, left)
	})
}

func TestExpiredKeyIsAbsentAtItsDeadline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "k", "v", state.TTL(100*time.Millisecond)))
		f.clock.Advance(99 * time.Millisecond)
		assert.Equal(t, "bytes:v", f.get("k"), "live one ms before its deadline")
		f.clock.Advance(time.Millisecond)
		assert.Equal(t, "<absent>", f.get("k"), "absent at its deadline, no sweep needed")
		_, err := f.db.TTL(f.ctx, "k")
		assert.ErrorIs(t, err, state.ErrNotFound)
		n, err := f.db.Del(f.ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, 0, n, "an expired key does not count as deleted")
	})
}

func TestTTLRoundsUpToMilliseconds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "k", "v", state.TTL(time.Nanosecond)))
		left, err := f.db.TTL(f.ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, time.Millisecond, left)
		f.clock.Advance(time.Millisecond)
		assert.Equal(t, "<absent>", f.get("k"))

		// Past a whole millisecond too: 1.5 ms is 2, never 1, for every
		// verb that takes a TTL.
		const ttl = 1500 * time.Microsecond
		require.NoError(t, f.db.Set(f.ctx, "s", "v", state.TTL(ttl)))
		_, err = f.db.Incr(f.ctx, "i", state.TTL(ttl))
		require.NoError(t, err)
		_, err = f.db.CAS(f.ctx, "c", nil, "v", state.TTL(ttl))
		require.NoError(t, err)
		require.NoError(t, f.db.Set(f.ctx, "e", "v"))
		ok, err := f.db.Expire(f.ctx, "e", ttl)
		require.NoError(t, err)
		require.True(t, ok)
		l, err := f.db.Lease(f.ctx, "job", "a", ttl)
		require.NoError(t, err)
		for _, k := range []string{"s", "i", "c", "e"} {
			left, err := f.db.TTL(f.ctx, k)
			require.NoError(t, err)
			assert.Equal(t, 2*time.Millisecond, left, "TTL of %q", k)
		}
		f.clock.Advance(time.Millisecond)
		for _, k := range []string{"s", "i", "c", "e"} {
			assert.NotEqual(t, "<absent>", f.get(k), "%q lives at least its TTL", k)
		}
		require.NoError(t, f.db.Renew(f.ctx, l, ttl), "the lease lives at least its TTL")
		f.clock.Advance(1500 * time.Microsecond)
		_, err = f.db.Lease(f.ctx, "job", "b", time.Second)
		require.ErrorIs(t, err, state.ErrLeaseHeld, "renewed for 1.5 ms, held 1.5 ms later")
		f.clock.Advance(500 * time.Microsecond)
		for _, k := range []string{"s", "i", "c", "e"} {
			assert.Equal(t, "<absent>", f.get(k), "%q", k)
		}
		_, err = f.db.Lease(f.ctx, "job", "b", time.Second)
		require.NoError(t, err, "the renewed lease lasted 2 ms, not more")
	})
}

// TestTTLCountsTheEnginesWholeMilliseconds: the engine's time counts whole
// milliseconds of the monotonic clock, so a key written late in one (0.999
// ms in) lives its TTL less that fraction: live 9 ms after it was written
// with a 10 ms TTL, gone 9.001 ms after, never later than 10 ms after.
func TestTTLCountsTheEnginesWholeMilliseconds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		f.clock.Advance(999 * time.Microsecond)
		require.NoError(t, f.db.Set(f.ctx, "k", "v", state.TTL(10*time.Millisecond)))
		f.clock.Advance(9 * time.Millisecond)
		assert.Equal(t, "bytes:v", f.get("k"), "live its TTL less one millisecond after it was written")
		f.clock.Advance(time.Microsecond)
		assert.Equal(t, "<absent>", f.get("k"), "gone at the engine's millisecond of its deadline")
	})
}

func TestDel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		for _, k := range []string{"a", "b", "c"} {
			require.NoError(t, f.db.Set(f.ctx, k, k))
		}
		require.NoError(t, f.db.Set(f.ctx, "e", "x", state.TTL(time.Millisecond)))
		f.clock.Advance(time.Millisecond)

		cases := []struct {
			keys []string
			want int
		}{
			{[]string{}, 0},
			{[]string{"missing"}, 0},
			{[]string{"a"}, 1},
			{[]string{"a"}, 0},
			{[]string{"b", "b"}, 1},
			{[]string{"c", "e", "missing"}, 1},
		}
		for _, c := range cases {
			n, err := f.db.Del(f.ctx, c.keys...)
			require.NoError(t, err)
			assert.Equal(t, c.want, n, "Del(%q)", c.keys)
		}
		for _, k := range []string{"a", "b", "c", "e"} {
			assert.Equal(t, "<absent>", f.get(k))
		}
	})
}

func TestBadKeysAndValues(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		keyCases := map[string]string{
			"empty":        "",
			"too long":     stringOf('k', state.MaxKeyBytes+1),
			"invalid utf8": "\xff\xfe",
			"nul byte":     "a\x00b",
		}
		for name, k := range keyCases {
			t.Run("key "+name, func(t *testing.T) {
				assert.ErrorIs(t, f.db.Set(f.ctx, k, 1), state.ErrInvalidKey)
				_, err := f.db.Get(f.ctx, k)
				assert.ErrorIs(t, err, state.ErrInvalidKey)
				_, err = f.db.Incr(f.ctx, k)
				assert.ErrorIs(t, err, state.ErrInvalidKey)
				_, err = f.db.Del(f.ctx, "ok", k)
				assert.ErrorIs(t, err, state.ErrInvalidKey)
			})
		}
		require.NoError(t, f.db.Set(f.ctx, stringOf('k', state.MaxKeyBytes), 1), "a key at the limit is fine")

		valueCases := map[string]any{
			"float":    1.5,
			"bool":     true,
			"nil":      nil,
			"int32":    int32(1),
			"too long": make([]byte, state.MaxValueBytes+1),
		}
		for name, v := range valueCases {
			t.Run("value "+name, func(t *testing.T) {
				err := f.db.Set(f.ctx, "k", v)
				assert.ErrorIs(t, err, state.ErrInvalidValue)
				assert.Equal(t, "<absent>", f.get("k"), "nothing written")
			})
		}
		require.NoError(t, f.db.Set(f.ctx, "big", make([]byte, state.MaxValueBytes)), "a value at the limit is fine")
		v, err := f.db.Get(f.ctx, "big")
		require.NoError(t, err)
		assert.Len(t, v.Bytes(), state.MaxValueBytes)

		for _, d := range []time.Duration{0, -time.Second} {
			assert.ErrorIs(t, f.db.Set(f.ctx, "k", 1, state.TTL(d)), state.ErrInvalidTTL)
			_, err := f.db.Incr(f.ctx, "k", state.TTL(d))
			assert.ErrorIs(t, err, state.ErrInvalidTTL)
		}
		assert.Equal(t, "<absent>", f.get("k"), "nothing written by refused calls")
	})
}

func stringOf(c byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}
