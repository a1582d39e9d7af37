package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/statekit/statekit/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWaitingRetryAfterIsEnough: the engine's time moves in whole
// milliseconds, so RetryAfter and Reset are whole milliseconds, rounded up. A
// caller that waits a refusal's RetryAfter is allowed the request it was
// refused, and one that waits a millisecond less is not; one that waits
// Reset finds the whole quota free, and a millisecond less does not. The
// limits here name moments between two milliseconds: a bucket of 3 per
// second (a token every 333,333,333 ns), sliding windows whose weighted
// counts decay to a fit between two milliseconds, and a fixed window of
// 1.5 ms. (RetryAfter and Reset were in nanoseconds: a caller that waited
// them exactly was refused again, and on a fixed window of 1.5 ms it was
// told to wait 500 µs again and again.)
func TestWaitingRetryAfterIsEnough(t *testing.T) {
	type ctor struct {
		name  string
		quota int64         // the whole quota: the limit, or the bucket's burst
		step  time.Duration // between the requests that spend it, times the round
		open  func(t *testing.T) (ratelimit.Limiter, func(time.Duration))
	}
	ctors := []ctor{
		{"bucket 3 per second", 3, 7 * time.Millisecond / 3, func(t *testing.T) (ratelimit.Limiter, func(time.Duration)) {
			db, clock := openDB(t)
			l, err := ratelimit.NewTokenBucket(db, 3, time.Second)
			require.NoError(t, err)
			return l, clock.Advance
		}},
		{"bucket 7 per 10s, burst 3", 3, 7 * time.Millisecond / 3, func(t *testing.T) (ratelimit.Limiter, func(time.Duration)) {
			db, clock := openDB(t)
			l, err := ratelimit.NewTokenBucket(db, 7, 10*time.Second, ratelimit.WithBurst(3))
			require.NoError(t, err)
			return l, clock.Advance
		}},
		{"sliding 3 per second", 3, 7 * time.Millisecond / 3, func(t *testing.T) (ratelimit.Limiter, func(time.Duration)) {
			db, clock := openDB(t)
			l, err := ratelimit.NewSlidingWindow(db, 3, time.Second)
			require.NoError(t, err)
			return l, clock.Advance
		}},
		{"sliding 7 per 1.5s", 7, 7 * time.Millisecond / 3, func(t *testing.T) (ratelimit.Limiter, func(time.Duration)) {
			db, clock := openDB(t)
			l, err := ratelimit.NewSlidingWindow(db, 7, 1500*time.Millisecond)
			require.NoError(t, err)
			return l, clock.Advance
		}},
		{"fixed 2 per 1.5ms", 2, 0, func(t *testing.T) (ratelimit.Limiter, func(time.Duration)) {
			db, clock := openDB(t)
			l, err := ratelimit.NewFixedWindow(db, 2, 1500*time.Microsecond)
			require.NoError(t, err)
			return l, clock.Advance
		}},
	}
	for _, c := range ctors {
		t.Run(c.name, func(t *testing.T) {
			l, advance := c.open(t)
			// twin decides the same request under two keys at one engine
			// time: the twin, m, is the history of k to probe a moment k
			// must not be allowed at.
			twin := func(k, m string, n int64) ratelimit.Decision {
				t.Helper()
				d := decide(t, l, k, n)
				require.Equal(t, d, decide(t, l, m, n), "twins decide alike")
				return d
			}
			for round := range 12 {
				n := 1 + int64(round)%2
				k, m := fmt.Sprint("k", round), fmt.Sprint("m", round)
				var d ratelimit.Decision
				for range 4 * c.quota {
					if d = twin(k, m, n); !d.Allowed {
						break
					}
					advance(time.Duration(round) * c.step) // sub-millisecond steps too
				}
				require.False(t, d.Allowed, "round %d: the quota runs out", round)
				assert.Zero(t, d.RetryAfter%time.Millisecond, "round %d: RetryAfter %v in whole ms", round, d.RetryAfter)
				assert.Zero(t, d.Reset%time.Millisecond, "round %d: Reset %v in whole ms", round, d.Reset)
				require.GreaterOrEqual(t, d.RetryAfter, time.Millisecond, "round %d", round)
				wait, n2 := d.RetryAfter, n
				if round%3 == 2 { // wait for the quota to be whole, and take it all
					wait, n2 = d.Reset, c.quota
				}
				advance(wait - time.Millisecond)
				early := decide(t, l, m, n2)
				assert.False(t, early.Allowed, "round %d: %d allowed a millisecond before %v: %+v", round, n2, wait, early)
				advance(time.Millisecond)
				late := decide(t, l, k, n2)
				assert.True(t, late.Allowed, "round %d: %d refused after waiting %v (%+v): %+v", round, n2, wait, d, late)
				advance(time.Duration(round) * 113 * time.Microsecond) // a phase between milliseconds
			}
		})
	}
}
