package ratelimit_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/ratelimit"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// emptiedByALargerBurst empties a bucket of 5 per window with a burst of
// 50 under key "k", then returns the bucket of 5 per window with the
// default burst (5) under the same prefix: a deploy that lowered the
// burst. The row is full again 50 tokens' time later; to the small bucket
// it is an empty bucket whose time is 45 tokens' time past its capacity.
func emptiedByALargerBurst(t *testing.T, db *state.DB, window time.Duration) ratelimit.Limiter {
	t.Helper()
	big, err := ratelimit.NewTokenBucket(db, 5, window, ratelimit.WithBurst(50))
	require.NoError(t, err)
	require.True(t, decide(t, big, "k", 50).Allowed, "the bucket of 50 is full")
	small, err := ratelimit.NewTokenBucket(db, 5, window)
	require.NoError(t, err)
	return small
}

// untilAllowed asks l for a request of n under key, waiting each refusal's
// RetryAfter with wait, until the request is allowed, and returns the
// refusals. It gives up after 100 refusals: a RetryAfter that is never
// enough.
func untilAllowed(t *testing.T, l ratelimit.Limiter, key string, n int64, wait func(time.Duration)) []ratelimit.Decision {
	t.Helper()
	var refusals []ratelimit.Decision
	for range 100 {
		d := decide(t, l, key, n)
		if d.Allowed {
			return refusals
		}
		refusals = append(refusals, d)
		wait(d.RetryAfter)
	}
	t.Fatalf("refused 100 times, waiting each RetryAfter: %+v ... %+v", refusals[0], refusals[len(refusals)-1])
	return nil
}

// requireAllowedAtRetryAfter: l, just refused a request of n under key
// with d, refuses it a millisecond before d.RetryAfter, writing nothing
// and saying a millisecond is left, and allows it at d.RetryAfter.
func requireAllowedAtRetryAfter(t *testing.T, db *state.DB, clock *faults.Clock, l ratelimit.Limiter, key string, n int64, d ratelimit.Decision) {
	t.Helper()
	require.False(t, d.Allowed)
	before := dump(t, db)
	clock.Advance(d.RetryAfter - time.Millisecond)
	early := decide(t, l, key, n)
	assert.False(t, early.Allowed, "a millisecond before RetryAfter %v: %+v", d.RetryAfter, early)
	assert.Equal(t, time.Millisecond, early.RetryAfter, "a millisecond left")
	assert.Equal(t, d.Reset-d.RetryAfter+time.Millisecond, early.Reset, "the same moment full again")
	assert.Equal(t, before, dump(t, db), "a refusal writes nothing")
	clock.Advance(time.Millisecond)
	late := decide(t, l, key, n)
	assert.True(t, late.Allowed, "after RetryAfter %v: %+v", d.RetryAfter, late)
}

// TestTokenBucketRefusalCountsFromAStoredTimeAhead: a bucket whose stored
// time (TAT) is more than its capacity ahead of now, written by a bucket
// of a larger burst under the same prefix or by a process whose clock is
// ahead, is an empty bucket that refills from that time. Its refusal's
// RetryAfter and Reset count from the stored time, so waiting RetryAfter
// is enough, and a millisecond less is not. Before, they counted from the
// time clamped to a capacity ahead, and since a refusal writes nothing,
// every refusal said the same: a bucket of 5 a minute told to wait 12 s
// was refused again for 552 s, 46 times.
func TestTokenBucketRefusalCountsFromAStoredTimeAhead(t *testing.T) {
	t.Run("a lowered burst", func(t *testing.T) {
		db, clock := openDB(t)
		small := emptiedByALargerBurst(t, db, time.Minute)
		// Full again in 50*12 s = 600 s; a token's room (12 s within the
		// capacity of 60 s) in 600+12-60 = 552 s, three in 576 s.
		d := decide(t, small, "k", 1)
		check(t, d, 5, want{false, 0, 552 * time.Second, 600 * time.Second}, "refused from the stored time")
		check(t, decide(t, small, "k", 3), 5, want{false, 0, 576 * time.Second, 600 * time.Second}, "3 need 24 s more")
		requireAllowedAtRetryAfter(t, db, clock, small, "k", 1, d)
		check(t, decide(t, small, "k", 1), 5, want{false, 0, 12 * time.Second, time.Minute}, "then a token every 12 s")

		// The caller's loop: wait each RetryAfter until allowed.
		db, clock = openDB(t)
		small = emptiedByALargerBurst(t, db, time.Minute)
		refusals := untilAllowed(t, small, "k", 1, clock.Advance)
		require.NotEmpty(t, refusals, "refused at first")
		require.Equal(t, 1, len(refusals), "one wait of RetryAfter is enough; refused %d times, the last %+v",
			len(refusals), refusals[len(refusals)-1])
	})
	t.Run("a process ahead", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "rl.state")
		clock := faults.NewClock(t0)
		behind, err := state.Open(path, state.WithClock(clock), state.WithoutBackground())
		require.NoError(t, err)
		defer behind.Close()
		clock.StepWall(30 * time.Second)
		ahead, err := state.Open(path, state.WithClock(clock), state.WithoutBackground())
		require.NoError(t, err)
		defer ahead.Close()
		a, err := ratelimit.NewTokenBucket(ahead, 5, time.Minute)
		require.NoError(t, err)
		check(t, decide(t, a, "k", 5), 5, want{true, 0, 12 * time.Second, time.Minute}, "emptied by the process ahead")
		b, err := ratelimit.NewTokenBucket(behind, 5, time.Minute)
		require.NoError(t, err)
		// Full again 60 s after the time ahead: 90 s on the clock behind;
		// a token's room 90+12-60 = 42 s from now.
		d := decide(t, b, "k", 1)
		check(t, d, 5, want{false, 0, 42 * time.Second, 90 * time.Second}, "refused from the time the process ahead wrote")
		requireAllowedAtRetryAfter(t, behind, clock, b, "k", 1, d)
	})
}

// TestTokenBucketHoldingUnderAMillisecondIsRefused: the engine's time
// moves in whole milliseconds, so a bucket allows at most its burst per
// millisecond, and one that holds less than a millisecond of its rate
// would run slower than stated: 10,000 a second with a burst of 5 allowed
// 5 a millisecond, half the rate (with a burst of 1, a tenth), and said
// nothing. NewTokenBucket refuses it with ErrInvalidConfig naming the
// cause and the smallest burst that runs at the rate; that burst, and a
// default burst on a window of 1 ms whose token time is rounded down
// (3 per ms: 999,999 ns of tokens, a whole millisecond of the rate), run
// at the stated rate, millisecond after millisecond.
func TestTokenBucketHoldingUnderAMillisecondIsRefused(t *testing.T) {
	db, clock := openDB(t)
	for _, c := range []struct {
		limit  int64
		window time.Duration
		burst  int64
		says   string
	}{
		{10_000, time.Second, 5, "burst 5 at 10000 per 1s refills in 500µs, want at least 1ms"},
		{10_000, time.Second, 1, "burst 1 at 10000 per 1s refills in 100µs, want at least 1ms"},
		{3, time.Millisecond, 2, "burst 2 at 3 per 1ms refills in 666.666µs, want at least 1ms"},
		{1_000_000_000, time.Second, 999_999, "burst 999999 at 1000000000 per 1s refills in 999.999µs, want at least 1ms"},
	} {
		l, err := ratelimit.NewTokenBucket(db, c.limit, c.window, ratelimit.WithBurst(c.burst))
		require.ErrorIs(t, err, ratelimit.ErrInvalidConfig, c.says)
		assert.ErrorContains(t, err, c.says)
		assert.ErrorContains(t, err, "the engine's time is whole milliseconds", c.says)
		assert.ErrorContains(t, err, "whole milliseconds, so the bucket would allow at most "+fmt.Sprint(c.burst)+" per millisecond", c.says)
		smallest := (c.limit*int64(time.Millisecond) + int64(c.window) - 1) / int64(c.window)
		assert.ErrorContains(t, err, fmt.Sprintf("use a burst of at least %d", smallest), c.says)
		assert.Nil(t, l, c.says)
		_, err = ratelimit.NewTokenBucket(db, c.limit, c.window, ratelimit.WithBurst(smallest))
		assert.NoError(t, err, "%s: the burst it names", c.says)
	}

	for _, c := range []struct {
		limit  int64
		window time.Duration
		opts   []ratelimit.Option
		perMs  int64
	}{
		{10_000, time.Second, []ratelimit.Option{ratelimit.WithBurst(10)}, 10},
		{3, time.Millisecond, nil, 3},
	} {
		l, err := ratelimit.NewTokenBucket(db, c.limit, c.window, append(c.opts, ratelimit.WithPrefix(fmt.Sprint(c.limit, ":")))...)
		require.NoError(t, err)
		for ms := range 200 {
			allowed := int64(0)
			for range 30 {
				if decide(t, l, "k", 1).Allowed {
					allowed++
				}
			}
			require.Equal(t, c.perMs, allowed, "%d per %v, millisecond %d: the stated rate", c.limit, c.window, ms)
			clock.Advance(time.Millisecond)
		}
	}
}
