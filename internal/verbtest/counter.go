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

// counterCases: Incr, IncrBy, Decr and DecrBy.
var counterCases = []verbCase{
	{"incr/from-absent-and-on", func(t *testing.T, e *env) {
		steps := []struct {
			name string
			do   func() (int64, error)
			want int64
		}{
			{"incr absent starts at 0", func() (int64, error) { return e.db.Incr(e.ctx, "c") }, 1},
			{"incr", func() (int64, error) { return e.db.Incr(e.ctx, "c") }, 2},
			{"incrby", func() (int64, error) { return e.db.IncrBy(e.ctx, "c", 40) }, 42},
			{"decr", func() (int64, error) { return e.db.Decr(e.ctx, "c") }, 41},
			{"decrby", func() (int64, error) { return e.db.DecrBy(e.ctx, "c", 50) }, -9},
			{"incrby negative", func() (int64, error) { return e.db.IncrBy(e.ctx, "c", -1) }, -10},
			{"incrby zero", func() (int64, error) { return e.db.IncrBy(e.ctx, "c", 0) }, -10},
			{"decrby negative adds", func() (int64, error) { return e.db.DecrBy(e.ctx, "c", -3) }, -7},
			{"decr absent", func() (int64, error) { return e.db.Decr(e.ctx, "d") }, -1},
			{"incrby absent", func() (int64, error) { return e.db.IncrBy(e.ctx, "ib", 5) }, 5},
			{"decrby absent", func() (int64, error) { return e.db.DecrBy(e.ctx, "db", 5) }, -5},
			{"incrby zero absent creates 0", func() (int64, error) { return e.db.IncrBy(e.ctx, "z", 0) }, 0},
		}
		for _, s := range steps {
			got, err := s.do()
			require.NoError(t, err, s.name)
			assert.Equal(t, s.want, got, s.name)
		}
		for k, want := range map[string]string{"c": "int:-7", "d": "int:-1", "ib": "int:5", "db": "int:-5", "z": "int:0"} {
			assert.Equal(t, want, e.get(k), k)
			e.noExpiry(k, "a counter made without TTL")
		}
	}},

	{"incr/on-set-integer", func(t *testing.T, e *env) {
		e.set("c", 10)
		n, err := e.db.Incr(e.ctx, "c")
		require.NoError(t, err)
		assert.Equal(t, int64(11), n)
		e.set("c64", int64(-10))
		n, err = e.db.DecrBy(e.ctx, "c64", 5)
		require.NoError(t, err)
		assert.Equal(t, int64(-15), n)
		assert.Equal(t, "int:-15", e.get("c64"))
	}},

	{"incr/on-bytes-is-not-integer", func(t *testing.T, e *env) {
		for i, v := range []any{"10", "abc", []byte{1}, "", []byte("-3"), " 1"} {
			key := fmt.Sprintf("s%d", i)
			e.set(key, v, state.TTL(time.Hour))
			before := e.get(key)
			calls := map[string]func() (int64, error){
				"incr":   func() (int64, error) { return e.db.Incr(e.ctx, key) },
				"incrby": func() (int64, error) { return e.db.IncrBy(e.ctx, key, 5) },
				"decr":   func() (int64, error) { return e.db.Decr(e.ctx, key) },
				"decrby": func() (int64, error) { return e.db.DecrBy(e.ctx, key, 3) },
				"ttl":    func() (int64, error) { return e.db.Incr(e.ctx, key, state.TTL(time.Second)) },
			}
			for name, call := range calls {
				n, err := call()
				assert.ErrorIs(t, err, state.ErrNotInteger, "%s on %q", name, v)
				assert.Zero(t, n, "%s on %q", name, v)
			}
			assert.Equal(t, before, e.get(key), "value %q unchanged", v)
			e.ttlWithin(key, time.Hour, "deadline unchanged")
		}
	}},

	{"incr/overflow", func(t *testing.T, e *env) {
		cases := []struct {
			start, delta int64
			overflow     bool
		}{
			{math.MaxInt64 - 1, 1, false},
			{math.MaxInt64, 1, true},
			{math.MaxInt64, math.MaxInt64, true},
			{1, math.MaxInt64, true},
			{0, math.MaxInt64, false},
			{math.MinInt64 + 1, -1, false},
			{math.MinInt64, -1, true},
			{-1, math.MinInt64, true},
			{0, math.MinInt64, false},
			{-2, math.MinInt64 + 1, true},
			{math.MaxInt64, math.MinInt64, false},
			{math.MinInt64, math.MaxInt64, false},
			{math.MaxInt64, 0, false},
			{math.MinInt64, 0, false},
			{1 << 53, 1, false}, // past a float64's exact integers
			{1<<53 + 1, 1, false},
			{math.MaxInt64 - 2, 1, false},
		}
		for i, c := range cases {
			key := fmt.Sprintf("c%d", i)
			e.set(key, c.start)
			got, err := e.db.IncrBy(e.ctx, key, c.delta)
			if c.overflow {
				assert.ErrorIs(t, err, state.ErrOverflow, "%d + %d", c.start, c.delta)
				v, gerr := e.db.Get(e.ctx, key)
				require.NoError(t, gerr)
				n, ok := v.Int()
				assert.True(t, ok, "%d + %d: still an integer, never a float", c.start, c.delta)
				assert.Equal(t, c.start, n, "%d + %d: value unchanged", c.start, c.delta)
				continue
			}
			require.NoError(t, err, "%d + %d", c.start, c.delta)
			assert.Equal(t, c.start+c.delta, got, "%d + %d", c.start, c.delta)
			assert.Equal(t, fmt.Sprintf("int:%d", c.start+c.delta), e.get(key), "%d + %d", c.start, c.delta)
		}

		e.set("max", int64(math.MaxInt64))
		_, err := e.db.Incr(e.ctx, "max")
		assert.ErrorIs(t, err, state.ErrOverflow, "Incr at MaxInt64")
		e.set("min", int64(math.MinInt64))
		_, err = e.db.Decr(e.ctx, "min")
		assert.ErrorIs(t, err, state.ErrOverflow, "Decr at MinInt64")
		_, err = e.db.DecrBy(e.ctx, "max", -1)
		assert.ErrorIs(t, err, state.ErrOverflow, "DecrBy -1 at MaxInt64")
		assert.Equal(t, "int:9223372036854775807", e.get("max"))
		assert.Equal(t, "int:-9223372036854775808", e.get("min"))
	}},

	{"incr/decrby-minint64", func(t *testing.T, e *env) {
		_, err := e.db.DecrBy(e.ctx, "fresh", math.MinInt64)
		assert.ErrorIs(t, err, state.ErrOverflow, "-MinInt64 does not exist")
		assert.ErrorContains(t, err, `decr "fresh"`)
		assert.Equal(t, "<absent>", e.get("fresh"), "nothing created")

		e.set("zero", 0)
		_, err = e.db.DecrBy(e.ctx, "zero", math.MinInt64)
		assert.ErrorIs(t, err, state.ErrOverflow)
		assert.Equal(t, "int:0", e.get("zero"))

		n, err := e.db.IncrBy(e.ctx, "fresh", math.MinInt64)
		require.NoError(t, err, "IncrBy MinInt64 from 0 is fine")
		assert.Equal(t, int64(math.MinInt64), n)
		n, err = e.db.DecrBy(e.ctx, "other", math.MaxInt64)
		require.NoError(t, err)
		assert.Equal(t, int64(-math.MaxInt64), n)
	}},

	{"incr/ttl-only-when-creating", func(t *testing.T, e *env) {
		_, err := e.db.TTL(e.ctx, "c")
		assert.ErrorIs(t, err, state.ErrNotFound, "before the first Incr")
		n, err := e.db.Incr(e.ctx, "c", state.TTL(time.Minute))
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
		e.ttlWithin("c", time.Minute, "Incr that creates the key gives it the TTL")
		n, err = e.db.Incr(e.ctx, "c", state.TTL(time.Hour))
		require.NoError(t, err)
		assert.Equal(t, int64(2), n)
		e.ttlWithin("c", time.Minute, "an existing key keeps its deadline")
		_, err = e.db.DecrBy(e.ctx, "c", 2, state.TTL(time.Hour))
		require.NoError(t, err)
		e.ttlWithin("c", time.Minute, "DecrBy too")

		e.set("p", 5)
		n, err = e.db.Incr(e.ctx, "p", state.TTL(time.Hour))
		require.NoError(t, err)
		assert.Equal(t, int64(6), n)
		e.noExpiry("p", "an existing key keeps its lack of deadline")

		for name, call := range map[string]func(string) (int64, error){
			"incrby": func(k string) (int64, error) { return e.db.IncrBy(e.ctx, k, 3, state.TTL(time.Hour)) },
			"decr":   func(k string) (int64, error) { return e.db.Decr(e.ctx, k, state.TTL(time.Hour)) },
			"decrby": func(k string) (int64, error) { return e.db.DecrBy(e.ctx, k, 3, state.TTL(time.Hour)) },
		} {
			_, err := call(name)
			require.NoError(t, err, name)
			e.ttlWithin(name, time.Hour, name+" that creates the key gives it the TTL")
		}
	}},
}
