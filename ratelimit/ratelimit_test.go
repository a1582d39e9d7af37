package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/ratelimit"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// t0 is the wall time every test clock starts at: on a whole day, so windows
// of a minute or an hour start with the test.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// openDB opens a fresh file on a clock the test steps by hand.
func openDB(t *testing.T) (*state.DB, *faults.Clock) {
	t.Helper()
	clock := faults.NewClock(t0)
	db, err := state.Open(filepath.Join(t.TempDir(), "rl.state"), state.WithClock(clock))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db, clock
}

// dump returns every live key with its value and deadline: what a refused
// request must leave as it was.
func dump(t *testing.T, db *state.DB) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, db.Scan(t.Context(), "", false, func(k state.KeyInfo) error {
		fmt.Fprintf(&b, "%s=%s@%d\n", k.Key, k.Value, k.Expires.UnixMilli())
		return nil
	}))
	return b.String()
}

// decide calls AllowN and fails the test on an error.
func decide(t *testing.T, l ratelimit.Limiter, key string, n int64) ratelimit.Decision {
	t.Helper()
	d, err := l.AllowN(t.Context(), key, n)
	require.NoError(t, err)
	return d
}

// want is a Decision without Limit, which every test case knows.
type want struct {
	allowed    bool
	remaining  int64
	retryAfter time.Duration
	reset      time.Duration
}

func check(t *testing.T, d ratelimit.Decision, limit int64, w want, what string) {
	t.Helper()
	assert.Equal(t, ratelimit.Decision{Allowed: w.allowed, Limit: limit, Remaining: w.remaining,
		RetryAfter: w.retryAfter, Reset: w.reset}, d, what)
}

func TestFixedWindowAllowsTheLimitPerWindow(t *testing.T) {
	db, clock := openDB(t)
	l, err := ratelimit.NewFixedWindow(db, 3, time.Minute)
	require.NoError(t, err)

	check(t, decide(t, l, "alice", 1), 3, want{true, 2, 0, time.Minute}, "1st")
	clock.Advance(10 * time.Second)
	check(t, decide(t, l, "alice", 1), 3, want{true, 1, 0, 50 * time.Second}, "2nd")
	check(t, decide(t, l, "alice", 1), 3, want{true, 0, 50 * time.Second, 50 * time.Second}, "3rd: the last")
	check(t, decide(t, l, "alice", 1), 3, want{false, 0, 50 * time.Second, 50 * time.Second}, "4th: refused")
	assert.Regexp(t, `alice[^=]*=4@`, dump(t, db), "a refused request of 1 is counted past the limit (one Incr)")
	check(t, decide(t, l, "bob", 1), 3, want{true, 2, 0, 50 * time.Second}, "another key counts alone")

	clock.Advance(49 * time.Second)
	check(t, decide(t, l, "alice", 1), 3, want{false, 0, time.Second, time.Second}, "still this window")
	clock.Advance(time.Second) // the next window starts on the minute
	check(t, decide(t, l, "alice", 1), 3, want{true, 2, 0, time.Minute}, "next window")
}

func TestFixedWindowAllowNTakesAllOrNothing(t *testing.T) {
	db, _ := openDB(t)
	l, err := ratelimit.NewFixedWindow(db, 10, time.Minute)
	require.NoError(t, err)

	check(t, decide(t, l, "k", 6), 10, want{true, 4, 0, time.Minute}, "6 of 10")
	before := dump(t, db)
	check(t, decide(t, l, "k", 5), 10, want{false, 4, time.Minute, time.Minute}, "5 more do not fit")
	assert.Equal(t, before, dump(t, db), "a refused request of n writes nothing")
	check(t, decide(t, l, "k", 4), 10, want{true, 0, time.Minute, time.Minute}, "4 more do")
	check(t, decide(t, l, "k", 1), 10, want{false, 0, time.Minute, time.Minute}, "full")
}

func TestSlidingWindowWeighsThePreviousWindow(t *testing.T) {
	db, clock := openDB(t)
	l, err := ratelimit.NewSlidingWindow(db, 10, time.Minute)
	require.NoError(t, err)

	for i := range 10 {
		d := decide(t, l, "k", 1)
		require.True(t, d.Allowed, "request %d", i+1)
	}
	check(t, decide(t, l, "k", 1), 10,
		// Next window at 60s, where 10 weighted by (60-e)/60 + 1 <= 10
		// once e >= 6s: 66s from now.
		want{false, 0, 66 * time.Second, 2 * time.Minute}, "11th refused")

	// 15s into the next window the 10 of the last one weigh 10*45/60 = 7.5:
	// room for 2 (8.5, 9.5), not 3 (10.5).
	clock.Advance(75 * time.Second)
	check(t, decide(t, l, "k", 1), 10, want{true, 1, 0, 105 * time.Second}, "1 over 7.5")
	// 7.5 + 2 = 9.5: no room for one more until 10*(60-e)/60 + 3 <= 10,
	// e >= 18s, 3s from now.
	check(t, decide(t, l, "k", 1), 10, want{true, 0, 3 * time.Second, 105 * time.Second}, "2 over 7.5")
	before := dump(t, db)
	check(t, decide(t, l, "k", 1), 10, want{false, 0, 3 * time.Second, 105 * time.Second}, "3 over 7.5 refused")
	assert.Equal(t, before, dump(t, db), "a refused request writes nothing")

	clock.Advance(3 * time.Second) // 10*42/60 = 7 + 3 = 10
	// 7 + 3 = 10; one more once 10*(60-e)/60 + 4 <= 10: e >= 24s.
	check(t, decide(t, l, "k", 1), 10, want{true, 0, 6 * time.Second, 102 * time.Second}, "after the weight decayed")
}

func TestSlidingWindowAllowNAndReset(t *testing.T) {
	db, clock := openDB(t)
	l, err := ratelimit.NewSlidingWindow(db, 10, time.Minute)
	require.NoError(t, err)
	clock.Advance(30 * time.Second)
	check(t, decide(t, l, "k", 4), 10, want{true, 6, 0, 90 * time.Second}, "4 of 10")
	// In the next window the 4 weigh 4*(60-e)/60, and 7 fit once that is
	// at most 3: e >= 15s, 45s from now.
	check(t, decide(t, l, "k", 7), 10, want{false, 6, 45 * time.Second, 90 * time.Second}, "7 more do not fit")
	clock.Advance(30 * time.Second)
	check(t, decide(t, l, "k", 7), 10, want{false, 6, 15 * time.Second, time.Minute}, "the 4 weigh 4 at the window's start")
	clock.Advance(15 * time.Second)
	// 4*45/60 + 7 = 10; one more once 4*(60-e)/60 + 8 <= 10: e >= 30s.
	check(t, decide(t, l, "k", 7), 10, want{true, 0, 15 * time.Second, 105 * time.Second}, "the 4 weigh 3")
	// Two windows later nothing counts; 10 fill this one, and one more fits
	// in the next once 10*(60-e)/60 + 1 <= 10: e >= 6s.
	clock.Advance(2 * time.Minute)
	check(t, decide(t, l, "k", 10), 10, want{true, 0, 51 * time.Second, 105 * time.Second}, "whole again")
}

func TestTokenBucketBurstThenRefill(t *testing.T) {
	db, clock := openDB(t)
	l, err := ratelimit.NewTokenBucket(db, 10, 10*time.Second) // a token a second, 10 at most
	require.NoError(t, err)

	check(t, decide(t, l, "k", 1), 10, want{true, 9, 0, time.Second}, "full bucket")
	check(t, decide(t, l, "k", 9), 10, want{true, 0, time.Second, 10 * time.Second}, "emptied")
	before := dump(t, db)
	check(t, decide(t, l, "k", 1), 10, want{false, 0, time.Second, 10 * time.Second}, "empty")
	check(t, decide(t, l, "k", 3), 10, want{false, 0, 3 * time.Second, 10 * time.Second}, "3 need 3s")
	assert.Equal(t, before, dump(t, db), "refused requests write nothing")

	clock.Advance(1500 * time.Millisecond)
	check(t, decide(t, l, "k", 1), 10, want{true, 0, 500 * time.Millisecond, 9500 * time.Millisecond}, "one token back")
	check(t, decide(t, l, "k", 1), 10, want{false, 0, 500 * time.Millisecond, 9500 * time.Millisecond}, "only one")

	clock.Advance(time.Hour)
	check(t, decide(t, l, "k", 10), 10, want{true, 0, time.Second, 10 * time.Second}, "full again after a quiet spell")
}

func TestTokenBucketWithBurst(t *testing.T) {
	db, clock := openDB(t)
	l, err := ratelimit.NewTokenBucket(db, 60, time.Minute, ratelimit.WithBurst(3))
	require.NoError(t, err)
	for i := range 3 {
		require.True(t, decide(t, l, "k", 1).Allowed, "request %d", i+1)
	}
	check(t, decide(t, l, "k", 1), 3, want{false, 0, time.Second, 3 * time.Second}, "burst of 3 spent")
	_, err = l.AllowN(t.Context(), "k", 4)
	assert.ErrorIs(t, err, ratelimit.ErrInvalidRequest, "4 never fit in a bucket of 3")
	clock.Advance(time.Second)
	check(t, decide(t, l, "k", 1), 3, want{true, 0, time.Second, 3 * time.Second}, "one a second")
}

// TestTokenBucketKeyOutlivesFullByACapacity: the bucket's row lives one
// capacity (here 10 s) past the time the bucket is full again, and no
// longer. (It once expired when the bucket was full: a decision whose verb
// ran a millisecond after the now it decided by found no row and took a
// full bucket, one token more than the bucket held.)
func TestTokenBucketKeyOutlivesFullByACapacity(t *testing.T) {
	db, clock := openDB(t)
	l, err := ratelimit.NewTokenBucket(db, 10, 10*time.Second, ratelimit.WithPrefix("b:"))
	require.NoError(t, err)
	decide(t, l, "k", 4)
	left, err := db.TTL(t.Context(), "b:k")
	require.NoError(t, err)
	assert.Equal(t, 14*time.Second, left, "full in 4 s, then a capacity of 10 s")
	clock.Advance(4 * time.Second)
	check(t, decide(t, l, "k", 10), 10, want{true, 0, time.Second, 10 * time.Second}, "full again after 4 s")
	clock.Advance(20 * time.Second)
	_, err = db.Get(t.Context(), "b:k")
	assert.ErrorIs(t, err, state.ErrNotFound, "gone a capacity after full")
}

// limiters builds each limiter with limit per window on db.
func limiters(t *testing.T, db *state.DB, limit int64, window time.Duration) map[string]ratelimit.Limiter {
	t.Helper()
	f, err := ratelimit.NewFixedWindow(db, limit, window)
	require.NoError(t, err)
	s, err := ratelimit.NewSlidingWindow(db, limit, window)
	require.NoError(t, err)
	b, err := ratelimit.NewTokenBucket(db, limit, window)
	require.NoError(t, err)
	return map[string]ratelimit.Limiter{"fixed": f, "sliding": s, "bucket": b}
}

func TestTimeIsTheEnginesNotTheWallClock(t *testing.T) {
	// A clock years in the past: windows and buckets follow it, not time.Now.
	clock := faults.NewClock(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	db, err := state.Open(filepath.Join(t.TempDir(), "rl.state"), state.WithClock(clock))
	require.NoError(t, err)
	defer db.Close()
	for name, l := range limiters(t, db, 2, time.Hour) {
		for range 2 {
			require.True(t, decide(t, l, "k", 1).Allowed, name)
		}
		d := decide(t, l, "k", 1)
		assert.False(t, d.Allowed, name)
		assert.LessOrEqual(t, d.RetryAfter, 2*time.Hour, name)
	}
	clock.Advance(2 * time.Hour)
	for name, l := range limiters(t, db, 2, time.Hour) {
		assert.True(t, decide(t, l, "k", 1).Allowed, "%s: two hours on the engine's clock later", name)
	}
}

func TestBadConfigurationIsAnError(t *testing.T) {
	db, _ := openDB(t)
	type ctor func(*state.DB, int64, time.Duration, ...ratelimit.Option) (ratelimit.Limiter, error)
	ctors := map[string]ctor{
		"fixed": func(db *state.DB, l int64, w time.Duration, o ...ratelimit.Option) (ratelimit.Limiter, error) {
			return ratelimit.NewFixedWindow(db, l, w, o...)
		},
		"sliding": func(db *state.DB, l int64, w time.Duration, o ...ratelimit.Option) (ratelimit.Limiter, error) {
			return ratelimit.NewSlidingWindow(db, l, w, o...)
		},
		"bucket": func(db *state.DB, l int64, w time.Duration, o ...ratelimit.Option) (ratelimit.Limiter, error) {
			return ratelimit.NewTokenBucket(db, l, w, o...)
		},
	}
	cases := []struct {
		name   string
		db     *state.DB
		limit  int64
		window time.Duration
		opts   []ratelimit.Option
		cause  string
		only   string // the one constructor this case applies to, if any
		not    string // the one constructor that accepts it, if any
	}{
		{name: "nil db", limit: 1, window: time.Second, cause: "nil *state.DB"},
		{name: "zero limit", db: db, limit: 0, window: time.Second, cause: "limit 0"},
		{name: "negative limit", db: db, limit: -5, window: time.Second, cause: "limit -5"},
		{name: "zero window", db: db, limit: 1, window: 0, cause: "window 0s"},
		{name: "negative window", db: db, limit: 1, window: -time.Minute, cause: "window -1m0s"},
		{name: "sub-millisecond window", db: db, limit: 1, window: time.Microsecond, cause: "at least 1ms"},
		{name: "window past int64", db: db, limit: 1, window: math.MaxInt64, cause: "at most"},
		{name: "window past 50 years", db: db, limit: 1, window: fiftyYears + 1, cause: "at most"},
		{name: "empty prefix", db: db, limit: 1, window: time.Second, opts: []ratelimit.Option{ratelimit.WithPrefix("")}, cause: "empty prefix"},
		{name: "nil option", db: db, limit: 1, window: time.Second, opts: []ratelimit.Option{nil}, cause: "nil Option"},
		{name: "zero burst", db: db, limit: 1, window: time.Second, opts: []ratelimit.Option{ratelimit.WithBurst(0)}, cause: "burst 0"},
		{name: "burst on a window", db: db, limit: 1, window: time.Second, opts: []ratelimit.Option{ratelimit.WithBurst(5)},
			cause: "only to NewTokenBucket", not: "bucket"},
		{name: "rate past a token per nanosecond", db: db, limit: 2_000_000_000, window: time.Second,
			cause: "more than one token per nanosecond", only: "bucket"},
		{name: "burst that overflows", db: db, limit: 1, window: time.Second, opts: []ratelimit.Option{ratelimit.WithBurst(math.MaxInt64)},
			cause: "to refill", only: "bucket"},
	}
	for _, c := range cases {
		for name, newL := range ctors {
			if (c.only != "" && name != c.only) || c.not == name {
				continue
			}
			l, err := newL(c.db, c.limit, c.window, c.opts...)
			assert.ErrorIs(t, err, ratelimit.ErrInvalidConfig, "%s: %s", name, c.name)
			assert.ErrorContains(t, err, c.cause, "%s: %s", name, c.name)
			assert.Nil(t, l, "%s: %s: no limiter", name, c.name)
		}
	}
	// What is refused above is accepted where it applies.
	_, err := ratelimit.NewTokenBucket(db, 1, time.Second, ratelimit.WithBurst(5))
	assert.NoError(t, err)
	_, err = ratelimit.NewFixedWindow(db, 2_000_000_000, time.Second)
	assert.NoError(t, err, "a window counts; any limit fits")
	for name, newL := range ctors {
		_, err := newL(db, 1, fiftyYears)
		assert.NoError(t, err, "%s: a window of 50 years", name)
	}
	_, err = ratelimit.NewTokenBucket(db, 1, time.Second, ratelimit.WithBurst(int64(fiftyYears/time.Second)))
	assert.NoError(t, err, "a burst that refills in 50 years")
	_, err = ratelimit.NewTokenBucket(db, 1, time.Second, ratelimit.WithBurst(int64(fiftyYears/time.Second)+1))
	assert.ErrorIs(t, err, ratelimit.ErrInvalidConfig, "a burst that takes a second more")
}

// fiftyYears is the longest window, and token bucket refill, a limiter takes.
const fiftyYears = 50 * 365 * 24 * time.Hour

// TestLimiterNoConstructorMadeIsAnError: a nil limiter, or a zero value
// (declared, not made by its constructor), has no file and no limit; its
// Allow says so, naming the constructor, rather than panic or refuse the
// request as if the request were bad.
func TestLimiterNoConstructorMadeIsAnError(t *testing.T) {
	var (
		nilFixed   *ratelimit.FixedWindow
		nilSliding *ratelimit.SlidingWindow
		nilBucket  *ratelimit.TokenBucket
	)
	for name, l := range map[string]ratelimit.Limiter{
		"nil FixedWindow":    nilFixed,
		"nil SlidingWindow":  nilSliding,
		"nil TokenBucket":    nilBucket,
		"zero FixedWindow":   &ratelimit.FixedWindow{},
		"zero SlidingWindow": &ratelimit.SlidingWindow{},
		"zero TokenBucket":   &ratelimit.TokenBucket{},
	} {
		_, err := l.Allow(context.Background(), "alice")
		require.ErrorIs(t, err, ratelimit.ErrInvalidConfig, name)
		assert.Regexp(t, `make it with New(FixedWindow|SlidingWindow|TokenBucket)$`, err.Error(), name)
	}
}

func TestBadRequestIsAnErrorAndWritesNothing(t *testing.T) {
	db, _ := openDB(t)
	for name, l := range limiters(t, db, 5, time.Minute) {
		for _, c := range []struct {
			key   string
			n     int64
			cause string
		}{
			{"", 1, "empty key"},
			{"k", 0, "n 0, want 1..5"},
			{"k", -1, "n -1, want 1..5"},
			{"k", 6, "n 6, want 1..5"},
		} {
			d, err := l.AllowN(t.Context(), c.key, c.n)
			assert.ErrorIs(t, err, ratelimit.ErrInvalidRequest, "%s %q %d", name, c.key, c.n)
			assert.ErrorContains(t, err, c.cause, "%s", name)
			if c.key != "" {
				bound := map[string]string{"bucket": "(the bucket's burst)"}[name]
				if bound == "" {
					bound = "(the limit)"
				}
				assert.ErrorContains(t, err, bound, "%s: names what bounds n", name)
			}
			assert.False(t, d.Allowed, "%s: an error never allows", name)
		}
		_, err := l.Allow(t.Context(), "")
		assert.ErrorIs(t, err, ratelimit.ErrInvalidRequest, name)
	}
	assert.Empty(t, dump(t, db), "bad requests write nothing")
}

func TestForeignStateIsAnError(t *testing.T) {
	db, _ := openDB(t)
	ctx := t.Context()
	require.NoError(t, db.Set(ctx, "ratelimit:bucket:k", "not a time"))
	require.NoError(t, db.Set(ctx, "ratelimit:sliding:k:"+fmt.Sprint(t0.UnixNano()/int64(time.Minute)), "x"))
	require.NoError(t, db.Set(ctx, "ratelimit:fixed:k:"+fmt.Sprint(t0.UnixNano()/int64(time.Minute)), "x"))
	for name, l := range limiters(t, db, 5, time.Minute) {
		d, err := l.AllowN(ctx, "k", 2) // through Update in every limiter
		assert.ErrorIs(t, err, ratelimit.ErrBadState, name)
		assert.False(t, d.Allowed, name)
		_, err = l.Allow(ctx, "k")
		assert.ErrorIs(t, err, ratelimit.ErrBadState, "%s: one request", name)
	}
	// A fixed window's single Incr finds what no decision writes: a count
	// below one after its own. A count it cannot add to, math.MaxInt64, is
	// one a decision writes (a full window of a limit near it counts its
	// refusals up to there, and limiters of one kind share keys whatever
	// their limits): refused, and left as it is
	// (TestFixedWindowRefusesAtTheLargestCount).
	idx := fmt.Sprint(t0.UnixNano() / int64(time.Minute))
	f, err := ratelimit.NewFixedWindow(db, 5, time.Minute)
	require.NoError(t, err)
	require.NoError(t, db.Set(ctx, "ratelimit:fixed:k:"+idx, -5))
	d, err := f.Allow(ctx, "k")
	assert.ErrorIs(t, err, ratelimit.ErrBadState, "fixed window over -5")
	assert.False(t, d.Allowed, "fixed window over -5")
	require.NoError(t, db.Set(ctx, "ratelimit:fixed:k:"+idx, int64(math.MaxInt64)))
	d, err = f.Allow(ctx, "k")
	require.NoError(t, err, "fixed window over the largest count")
	check(t, d, 5, want{false, 0, time.Minute, time.Minute}, "fixed window over the largest count")
	v, err := db.Get(ctx, "ratelimit:fixed:k:"+idx)
	require.NoError(t, err)
	assert.Equal(t, "9223372036854775807", v.String(), "left as it is")
	// A count or a time below zero, which no decision writes, read inside
	// an Update: a window would take it for room it never had.
	for _, k := range []string{"ratelimit:bucket:k", "ratelimit:sliding:k:" + idx, "ratelimit:fixed:k:" + idx} {
		require.NoError(t, db.Set(ctx, k, -5))
	}
	for name, l := range limiters(t, db, 5, time.Minute) {
		d, err := l.AllowN(ctx, "k", 2)
		assert.ErrorIs(t, err, ratelimit.ErrBadState, "%s over -5", name)
		assert.ErrorContains(t, err, "holds -5", name)
		assert.False(t, d.Allowed, "%s over -5", name)
	}
}

func TestKeysTheEngineWouldRefuseAreBadRequests(t *testing.T) {
	db, _ := openDB(t)
	for name, l := range limiters(t, db, 5, time.Minute) {
		for _, c := range []struct {
			key   string
			cause string
		}{
			{strings.Repeat("k", state.MaxKeyBytes), "over the"},
			{"bad\xff", "not valid UTF-8"},
			{"nul\x00", "NUL"},
			{"\x00nul", "NUL"},
		} {
			d, err := l.Allow(t.Context(), c.key)
			assert.ErrorIs(t, err, ratelimit.ErrInvalidRequest, "%s %q", name, c.key)
			assert.ErrorContains(t, err, c.cause, "%s", name)
			assert.False(t, d.Allowed, name)
		}
		// A key too long is quoted by its first 32 bytes, not whole.
		_, err := l.Allow(t.Context(), strings.Repeat("k", state.MaxKeyBytes))
		assert.ErrorContains(t, err, `"`+strings.Repeat("k", 32)+`..."`, name)
		assert.Less(t, len(err.Error()), 400, "%s: %.300s", name, err)
	}
	// The longest key a limiter takes is one the engine takes too, and it
	// is the documented one: the engine's 1,024 bytes less the limiter's
	// default prefix and, for a window, 20 bytes of window index (":" and
	// up to 19 digits). A byte more is ErrInvalidRequest.
	documented := map[string]int{
		"fixed":   1024 - len("ratelimit:fixed:") - 20,
		"sliding": 1024 - len("ratelimit:sliding:") - 20,
		"bucket":  1024 - len("ratelimit:bucket:"),
	}
	for name, l := range limiters(t, db, 5, time.Minute) {
		longest := 0
		for n := state.MaxKeyBytes; n > 0; n-- {
			if _, err := l.Allow(t.Context(), strings.Repeat("k", n)); !errors.Is(err, ratelimit.ErrInvalidRequest) {
				require.NoError(t, err, "%s: a key of %d bytes", name, n)
				longest = n
				break
			}
		}
		assert.Equal(t, documented[name], longest, "%s: the longest key it takes", name)
	}
	_, err := ratelimit.NewFixedWindow(db, 1, time.Minute, ratelimit.WithPrefix(strings.Repeat("p", state.MaxKeyBytes)))
	assert.ErrorIs(t, err, ratelimit.ErrInvalidConfig)
	_, err = ratelimit.NewFixedWindow(db, 1, time.Minute, ratelimit.WithPrefix("p\xff"))
	assert.ErrorIs(t, err, ratelimit.ErrInvalidConfig)
}

func TestCancelledContextIsAnError(t *testing.T) {
	db, _ := openDB(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for name, l := range limiters(t, db, 5, time.Minute) {
		d, err := l.Allow(ctx, "k")
		assert.True(t, errors.Is(err, context.Canceled), "%s: %v", name, err)
		assert.False(t, d.Allowed, name)
	}
}
