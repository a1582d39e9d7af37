package ratelimit_test

import (
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

// TestForeignStateErrorIsShort: a limiter's key holding a large value
// another program wrote fails with ErrBadState naming the key and what it
// holds in a line, not with the whole value (a 1 MiB error message, logged
// by every request the middleware answers 500).
func TestForeignStateErrorIsShort(t *testing.T) {
	db, _ := openDB(t)
	ctx := t.Context()
	big := strings.Repeat("x", state.MaxValueBytes)
	idx := t0.UnixNano() / int64(time.Minute)
	require.NoError(t, db.Set(ctx, "ratelimit:bucket:k", big))
	require.NoError(t, db.Set(ctx, "ratelimit:sliding:k:"+fmt.Sprint(idx-1), big)) // the previous window's
	require.NoError(t, db.Set(ctx, "ratelimit:fixed:k:"+fmt.Sprint(idx), big))
	for name, l := range limiters(t, db, 5, time.Minute) {
		for _, n := range []int64{1, 2} {
			_, err := l.AllowN(ctx, "k", n)
			require.ErrorIs(t, err, ratelimit.ErrBadState, "%s, n %d", name, n)
			assert.Less(t, len(err.Error()), 400, "%s, n %d: %.300s", name, n, err)
			assert.Contains(t, err.Error(), "ratelimit:", "%s, n %d: names the key", name, n)
		}
	}
	d, err := limiters(t, db, 5, time.Minute)["sliding"].AllowN(ctx, "k", 2)
	require.ErrorIs(t, err, ratelimit.ErrBadState)
	assert.Contains(t, err.Error(), fmt.Sprintf("%d bytes", state.MaxValueBytes), "says how much it holds")
	assert.False(t, d.Allowed)
	// What it holds is quoted by its first 32 bytes, however short the rest.
	require.NoError(t, db.Set(ctx, "ratelimit:bucket:k", strings.Repeat("y", 33)))
	_, err = limiters(t, db, 5, time.Minute)["bucket"].Allow(ctx, "k")
	require.ErrorIs(t, err, ratelimit.ErrBadState)
	assert.Contains(t, err.Error(), `33 bytes "`+strings.Repeat("y", 32)+`..."`)
}

// TestTokenBucketForeignFutureIsAnError: a bucket's key holding a time far
// ahead that no bucket wrote (no deadline, or a deadline before the time
// it holds; every bucket writes its TAT with a deadline a capacity past
// it) is ErrBadState. Before, it was taken for a full bucket written by a
// process ahead: refused with a RetryAfter that was never true, for ever,
// since a refused request writes nothing and the row had no deadline. A
// row a bucket wrote, from a process ahead or with a larger burst, is
// still taken as an empty bucket, refilling from the time it holds: the
// refusal's RetryAfter and Reset count from that time
// (TestTokenBucketRefusalCountsFromAStoredTimeAhead), however near the end
// of int64 it is.
func TestTokenBucketForeignFutureIsAnError(t *testing.T) {
	ctx := t.Context()
	far := t0.Add(time.Hour).UnixNano()
	for name, c := range map[string]struct {
		set  []state.WriteOption
		says string
	}{
		"no deadline":            {nil, "with no deadline"},
		"a deadline before it":   {[]state.WriteOption{state.TTL(time.Minute)}, "ahead, with a deadline "},
		"a deadline 2ms short":   {[]state.WriteOption{state.TTL(time.Hour - 2*time.Millisecond)}, "ahead, with a deadline "},
		"the largest, no expiry": {nil, "with no deadline"},
	} {
		db, clock := openDB(t)
		v := far
		if name == "the largest, no expiry" {
			v = math.MaxInt64
		}
		require.NoError(t, db.Set(ctx, "ratelimit:bucket:k", v, c.set...))
		l := limiters(t, db, 5, time.Minute)["bucket"]
		for range 2 {
			d, err := l.Allow(ctx, "k")
			assert.ErrorIs(t, err, ratelimit.ErrBadState, name)
			assert.ErrorContains(t, err, c.says, name)
			assert.False(t, d.Allowed, name)
			clock.Advance(12 * time.Second) // a token's time
		}
	}
	// A deadline read in whole milliseconds may fall a millisecond short of
	// the time it was written a capacity past: such a row is a bucket's,
	// empty, and so is one a millisecond more than a capacity ahead, and
	// one holding the largest time with the longest deadline. Each is full
	// again at the time it holds, and has a token's room 48 s before.
	largest := time.Duration(math.MaxInt64-t0.UnixNano()).Truncate(time.Millisecond) + time.Millisecond // rounded up
	for name, c := range map[string]struct {
		tat  int64
		set  []state.WriteOption
		want want
	}{
		"a deadline 1ms short": {far, []state.WriteOption{state.TTL(time.Hour - time.Millisecond)},
			want{false, 0, time.Hour - 48*time.Second, time.Hour}},
		"1ms past a capacity ahead": {t0.Add(time.Minute + time.Millisecond).UnixNano(), nil,
			want{false, 0, 12*time.Second + time.Millisecond, time.Minute + time.Millisecond}},
		"the largest, the longest deadline": {math.MaxInt64, []state.WriteOption{state.TTL(math.MaxInt64)},
			want{false, 0, largest - 48*time.Second, largest}},
	} {
		db, _ := openDB(t)
		if c.set == nil {
			c.set = []state.WriteOption{state.TTL(2 * time.Minute)}
		}
		require.NoError(t, db.Set(ctx, "ratelimit:bucket:k", c.tat, c.set...))
		d, err := limiters(t, db, 5, time.Minute)["bucket"].Allow(ctx, "k")
		require.NoError(t, err, name)
		check(t, d, 5, c.want, name)
	}

	// Rows a bucket wrote: by a process whose engine time is ahead, and by
	// a bucket of ten times the capacity (a deploy that lowered it).
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
	check(t, decide(t, b, "k", 1), 5, want{false, 0, 42 * time.Second, 90 * time.Second}, "empty for the process behind, full 90 s from its now")
	big, err := ratelimit.NewTokenBucket(behind, 5, time.Minute, ratelimit.WithBurst(50), ratelimit.WithPrefix("big:"))
	require.NoError(t, err)
	decide(t, big, "k", 50)
	small, err := ratelimit.NewTokenBucket(behind, 5, time.Minute, ratelimit.WithPrefix("big:"))
	require.NoError(t, err)
	check(t, decide(t, small, "k", 1), 5, want{false, 0, 552 * time.Second, 600 * time.Second}, "a larger bucket's row is an empty smaller bucket, full 600 s from now")
}

// TestErrorsQuoteByWholeCharacters: an error quotes a long key, or what a
// limiter's key holds, by its first 32 bytes, fewer where the 32nd byte
// falls inside a character, so the quote never ends in half of one.
// Before, it cut at 32 bytes whatever was there: "kéé...é\xc3...".
func TestErrorsQuoteByWholeCharacters(t *testing.T) {
	db, _ := openDB(t)
	long := "k" + strings.Repeat("é", 600) // the 33rd byte is the 2nd of an é
	quoted := `"k` + strings.Repeat("é", 15) + `..."`
	for name, l := range limiters(t, db, 5, time.Minute) {
		_, err := l.Allow(t.Context(), long)
		require.ErrorIs(t, err, ratelimit.ErrInvalidRequest, name)
		assert.ErrorContains(t, err, quoted, name)
		assert.NotContains(t, err.Error(), `\x`, "%s: no half character", name)
	}
	require.NoError(t, db.Set(t.Context(), "ratelimit:bucket:k", "y"+strings.Repeat("😀", 20))) // the 4th byte of a 😀
	_, err := limiters(t, db, 5, time.Minute)["bucket"].Allow(t.Context(), "k")
	require.ErrorIs(t, err, ratelimit.ErrBadState)
	assert.ErrorContains(t, err, `81 bytes "y`+strings.Repeat("😀", 7)+`..."`)
	assert.NotContains(t, err.Error(), `\x`, "no half character")
}
