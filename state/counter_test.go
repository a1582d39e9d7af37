package state_test

import (
	"math"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIncrVerbs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		steps := []struct {
			name string
			do   func() (int64, error)
			want int64
		}{
			{"incr absent starts at 0", func() (int64, error) { return f.db.Incr(f.ctx, "c") }, 1},
			{"incr", func() (int64, error) { return f.db.Incr(f.ctx, "c") }, 2},
			{"incrby", func() (int64, error) { return f.db.IncrBy(f.ctx, "c", 40) }, 42},
			{"decr", func() (int64, error) { return f.db.Decr(f.ctx, "c") }, 41},
			{"decrby", func() (int64, error) { return f.db.DecrBy(f.ctx, "c", 50) }, -9},
			{"incrby negative", func() (int64, error) { return f.db.IncrBy(f.ctx, "c", -1) }, -10},
			{"incrby zero", func() (int64, error) { return f.db.IncrBy(f.ctx, "c", 0) }, -10},
			{"decr absent", func() (int64, error) { return f.db.Decr(f.ctx, "d") }, -1},
		}
		for _, s := range steps {
			got, err := s.do()
			require.NoError(t, err, s.name)
			assert.Equal(t, s.want, got, s.name)
		}
		assert.Equal(t, "int:-10", f.get("c"))
	})
}

func TestIncrOnSetInteger(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "c", 10))
		n, err := f.db.Incr(f.ctx, "c")
		require.NoError(t, err)
		assert.Equal(t, int64(11), n)
	})
}

func TestIncrNotInteger(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		for _, v := range []any{"10", "abc", []byte{1}, ""} {
			require.NoError(t, f.db.Set(f.ctx, "s", v))
			before := f.get("s")
			_, err := f.db.Incr(f.ctx, "s")
			assert.ErrorIs(t, err, state.ErrNotInteger, "value %q", v)
			_, err = f.db.DecrBy(f.ctx, "s", 3)
			assert.ErrorIs(t, err, state.ErrNotInteger)
			assert.Equal(t, before, f.get("s"), "value unchanged")
		}
	})
}

func TestIncrOverflow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
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
		}
		for _, c := range cases {
			require.NoError(t, f.db.Set(f.ctx, "c", c.start))
			got, err := f.db.IncrBy(f.ctx, "c", c.delta)
			if c.overflow {
				assert.ErrorIs(t, err, state.ErrOverflow, "%d + %d", c.start, c.delta)
				v, gerr := f.db.Get(f.ctx, "c")
				require.NoError(t, gerr)
				n, ok := v.Int()
				assert.True(t, ok, "still an integer, never a float")
				assert.Equal(t, c.start, n, "value unchanged")
				continue
			}
			require.NoError(t, err, "%d + %d", c.start, c.delta)
			assert.Equal(t, c.start+c.delta, got)
		}
		_, err := f.db.DecrBy(f.ctx, "fresh", math.MinInt64)
		assert.ErrorIs(t, err, state.ErrOverflow, "-MinInt64 does not exist")
		assert.Equal(t, "<absent>", f.get("fresh"))
		n, err := f.db.IncrBy(f.ctx, "fresh", math.MinInt64)
		require.NoError(t, err)
		assert.Equal(t, int64(math.MinInt64), n)
	})
}

func TestIncrTTLOnlyWhenCreating(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		_, err := f.db.Incr(f.ctx, "c", state.TTL(time.Second))
		require.NoError(t, err)
		f.clock.Advance(400 * time.Millisecond)
		_, err = f.db.Incr(f.ctx, "c", state.TTL(time.Hour))
		require.NoError(t, err)
		left, err := f.db.TTL(f.ctx, "c")
		require.NoError(t, err)
		assert.Equal(t, 600*time.Millisecond, left, "an existing key keeps its deadline")

		require.NoError(t, f.db.Set(f.ctx, "p", 5))
		_, err = f.db.Incr(f.ctx, "p", state.TTL(time.Second))
		require.NoError(t, err)
		left, err = f.db.TTL(f.ctx, "p")
		require.NoError(t, err)
		assert.Equal(t, state.NoExpiry, left, "an existing key keeps its lack of deadline")
	})
}

func TestExpiredCounterStartsOver(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		for i := 0; i < 3; i++ {
			_, err := f.db.Incr(f.ctx, "rate", state.TTL(time.Second))
			require.NoError(t, err)
		}
		f.clock.Advance(time.Second)
		n, err := f.db.Incr(f.ctx, "rate", state.TTL(time.Second))
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "expired counter starts over")
		left, err := f.db.TTL(f.ctx, "rate")
		require.NoError(t, err)
		assert.Equal(t, time.Second, left, "and gets the new TTL")

		require.NoError(t, f.db.Set(f.ctx, "s", "text", state.TTL(time.Millisecond)))
		f.clock.Advance(time.Millisecond)
		n, err = f.db.Incr(f.ctx, "s")
		require.NoError(t, err, "an expired bytes value is absent, not a type error")
		assert.Equal(t, int64(1), n)
		left, err = f.db.TTL(f.ctx, "s")
		require.NoError(t, err)
		assert.Equal(t, state.NoExpiry, left, "the old deadline is gone with the old value")
	})
}
