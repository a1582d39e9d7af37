package ratelimit

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/statekit/statekit/state"
)

// SlidingWindow allows about limit requests per key in any window of time
// ending now, by the weighted two-window count: the count of the current
// fixed window plus the count of the previous one weighted by the share of
// it the sliding window still covers. At 25% into a window of a minute with
// 40 requests in the previous minute and 10 in this one, the estimate is
// 40*0.75 + 10 = 40. This is the approximation Cloudflare and others use:
// it assumes the previous window's requests were spread evenly, and it
// keeps two counters per key instead of a log of every request.
//
// A request of n is allowed if estimate + n <= limit, compared exactly in
// integers (no rounding). Each decision reads both counters and, if
// allowed, adds n to the current one, in one Update at that transaction's
// time: exact across goroutines and processes. A refused request writes
// nothing.
//
// Engine time is whole milliseconds, so a window of one millisecond always
// counts the previous window in full: it allows about half its limit.
type SlidingWindow struct {
	db     *state.DB
	limit  int64
	window int64 // nanoseconds
	prefix string
}

var _ Limiter = (*SlidingWindow)(nil)

// NewSlidingWindow returns a limiter that allows about limit requests per key
// in any window ending now. The window is at least a millisecond and at most
// 50 years; the limit at least 1. Its keys start with "ratelimit:sliding:" unless WithPrefix says
// otherwise.
func NewSlidingWindow(db *state.DB, limit int64, window time.Duration, opts ...Option) (*SlidingWindow, error) {
	c, err := newConfig("sliding", db, limit, window, windowKeyRoom, opts)
	if err != nil {
		return nil, fmt.Errorf("sliding window: %w", err)
	}
	if c.burst != 0 {
		return nil, fmt.Errorf("sliding window: %w: WithBurst applies only to NewTokenBucket", ErrInvalidConfig)
	}
	return &SlidingWindow{db: db, limit: limit, window: int64(window), prefix: c.prefix}, nil
}

// Allow decides one request under key.
func (s *SlidingWindow) Allow(ctx context.Context, key string) (Decision, error) {
	return s.AllowN(ctx, key, 1)
}

// AllowN decides a request of n under key: allowed if the weighted count of
// the last window plus n is within the limit.
func (s *SlidingWindow) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	if s == nil || s.db == nil {
		return Decision{}, unmade("SlidingWindow")
	}
	if err := checkRequest(key, n, s.limit, s.prefix, windowKeyRoom); err != nil {
		return Decision{}, err
	}
	w := s.window
	var (
		into, left int64 // how far into the current window (0..w-1), and until it ends
		curKey     string
		prev, cur  int64
		allowed    bool
	)
	guess := guessWindow(s.db, w)
	err := decide(ctx, s.db, twoStepsOn(ctx), func(tx *state.Tx) error {
		// On a store opened from a URL the callback may run again after a
		// conflict: only the last run's answer counts.
		allowed = false
		now, counted, err := readWindows(ctx, tx, s.prefix, key, guess-1, guess)
		if err != nil {
			return err
		}
		idx := now / w
		into = now - idx*w
		left = w - into
		curKey = windowKey(s.prefix, key, idx)
		if prev, err = counted(idx - 1); err != nil {
			return err
		}
		if cur, err = counted(idx); err != nil {
			return err
		}
		allowed = s.fits(prev, cur, n, into)
		return nil
	}, func(tx *state.Tx) error {
		if !allowed {
			return nil
		}
		// The current counter is the previous one all through the next
		// window, and lives a window more: a process whose engine time is
		// ahead sweeps rows by its own clock, and one a little behind it
		// still weighs this count (TestSlidingWindowCountSurvivesASweepAhead).
		var err error
		cur, err = tx.IncrBy(curKey, n, state.TTL(time.Duration(left+2*w)))
		return err
	})
	if err != nil {
		return Decision{}, fmt.Errorf("sliding window %q: %w", key, err)
	}

	d := Decision{Allowed: allowed, Limit: s.limit, Remaining: s.remaining(prev, cur, into)}
	if allowed {
		d.RetryAfter = s.wait(prev, cur, 1, into, left)
	} else {
		d.RetryAfter = s.wait(prev, cur, n, into, left)
	}
	switch {
	case cur > 0: // counted until the end of the next window
		d.Reset = time.Duration(left + w)
	case prev > 0: // counted until the end of this one
		d.Reset = time.Duration(left)
	}
	return d.inWholeMillis(), nil
}

// fits reports whether prev*(w-into)/w + cur + n <= limit, exactly:
// prev*(w-into) + (cur+n)*w <= limit*w.
func (s *SlidingWindow) fits(prev, cur, n, into int64) bool {
	w := uint64(s.window)
	lhs := mul(uint64(prev), w-uint64(into)).add(mul(uint64(cur)+uint64(n), w))
	return !lhs.greater(mul(uint64(s.limit), w))
}

// remaining is how many requests of one fit now:
// floor(limit - cur - prev*(w-into)/w), never negative.
func (s *SlidingWindow) remaining(prev, cur, into int64) int64 {
	room := s.limit - cur
	if room <= 0 {
		return 0
	}
	// weighted = ceil(prev*(w-into)/w) <= prev
	w := uint64(s.window)
	weighted := int64(mul(uint64(prev), w-uint64(into)).ceilDiv(w))
	return max(0, room-weighted)
}

// wait is how long from now until a request of n fits if no other request
// comes: zero if it fits now. into and left place now in the current window.
func (s *SlidingWindow) wait(prev, cur, n, into, left int64) time.Duration {
	w := s.window
	if n <= s.limit-cur {
		// It fits in this window once the previous window's weight has
		// decayed to limit-cur-n: prev*(w-e) <= (limit-cur-n)*w, that is
		// e >= w - floor((limit-cur-n)*w/prev).
		if prev == 0 {
			return 0
		}
		e := w - int64(min(mul(uint64(s.limit-cur-n), uint64(w)).floorDiv(uint64(prev)), uint64(w)))
		return time.Duration(max(0, e-into))
	}
	// Not in this window: in the next one, this window's cur is the
	// previous count, and it must decay to limit-n (cur > 0 here).
	e := w - int64(min(mul(uint64(s.limit-n), uint64(w)).floorDiv(uint64(cur)), uint64(w)))
	return time.Duration(left + e)
}

// u128 is an unsigned 128-bit integer: the weighted counts are products of a
// count and a window in nanoseconds, which overflow 64 bits for a large
// limit over a long window.
type u128 struct{ hi, lo uint64 }

func mul(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, carry := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, carry) // never overflows: each term < 2^127
	return u128{hi, lo}
}

func (x u128) greater(y u128) bool {
	return x.hi > y.hi || (x.hi == y.hi && x.lo > y.lo)
}

// floorDiv returns x/d, saturating at math.MaxUint64.
func (x u128) floorDiv(d uint64) uint64 {
	if x.hi >= d {
		return math.MaxUint64
	}
	q, _ := bits.Div64(x.hi, x.lo, d)
	return q
}

// ceilDiv returns x/d rounded up, saturating at math.MaxUint64.
func (x u128) ceilDiv(d uint64) uint64 {
	if x.hi >= d {
		return math.MaxUint64
	}
	q, r := bits.Div64(x.hi, x.lo, d)
	if r != 0 && q < math.MaxUint64 {
		q++
	}
	return q
}
