package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/statekit/statekit/state"
)

// FixedWindow allows limit requests per key in each window of time, the
// windows aligned on the unix epoch (a window of a minute starts on the
// minute). Each window's count is its own key, named by the window's index,
// so a new window starts from zero without a reset, and the key expires one
// window after its own ends.
//
// A request of one is a single Incr: the one statement counts it and
// returns the count that decides it, so no two callers, in any process, can
// both see room for the last request. A refused request of one is counted
// too (the window is already full, so the count only grows past the limit).
// The Incr is placed by the engine's time read just before it; if it
// returns more than a window after its window ended, the count may have
// expired before it ran, and the request is decided again in one Update by
// that transaction's time (its first count stays: a window may then refuse
// a request it had room for, never allow one too many).
// A request of n > 1 reads the count and adds n only if all n fit, in one
// Update, so a refused big request leaves the room it did not take. So is a
// request of one whose Incr finds the count at math.MaxInt64 (a limit near
// it, its refusals counted up to there): it is refused, and the count stays.
//
// The price of a fixed window: a client can spend its limit at the end of
// one window and again at the start of the next. SlidingWindow and
// TokenBucket smooth that edge.
type FixedWindow struct {
	db     *state.DB
	limit  int64
	window int64 // nanoseconds
	prefix string
}

var _ Limiter = (*FixedWindow)(nil)

// NewFixedWindow returns a limiter that allows limit requests per key in
// each window. The window is at least a millisecond and at most 50 years;
// the limit at least 1.
// Its keys start with "ratelimit:fixed:" unless WithPrefix says otherwise.
func NewFixedWindow(db *state.DB, limit int64, window time.Duration, opts ...Option) (*FixedWindow, error) {
	c, err := newConfig("fixed", db, limit, window, windowKeyRoom, opts)
	if err != nil {
		return nil, fmt.Errorf("fixed window: %w", err)
	}
	if c.burst != 0 {
		return nil, fmt.Errorf("fixed window: %w: WithBurst applies only to NewTokenBucket", ErrInvalidConfig)
	}
	return &FixedWindow{db: db, limit: limit, window: int64(window), prefix: c.prefix}, nil
}

// Allow decides one request under key.
func (f *FixedWindow) Allow(ctx context.Context, key string) (Decision, error) {
	return f.AllowN(ctx, key, 1)
}

// AllowN decides a request of n under key: allowed if the window's count
// plus n is within the limit.
func (f *FixedWindow) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	if f == nil || f.db == nil {
		return Decision{}, unmade("FixedWindow")
	}
	if err := checkRequest(key, n, f.limit, f.prefix, windowKeyRoom); err != nil {
		return Decision{}, err
	}
	twoSteps := twoStepsOn(ctx)
	if n == 1 && !twoSteps {
		d, placed, err := f.incr(ctx, key)
		if err != nil || placed {
			return d, err
		}
		// The Incr ran so long after the time it decided by that the
		// window's count may have expired before it: it may have counted
		// in a fresh one. Or it found the count at math.MaxInt64, which
		// it cannot add to. Decide again, inside a transaction.
	}
	return f.inTx(ctx, key, n, twoSteps)
}

// incr decides a request of one by a single Incr on the count of the window
// db.Now places it in. placed is false when the Incr may have run after the
// count's guaranteed life (a window past the window's end): the decision
// cannot be trusted, and the caller decides again. The request it counted
// then stays counted: a window may refuse a request it could have taken,
// never take one too many. placed is false too when the count is
// math.MaxInt64, which the Incr cannot add to: the caller decides in a
// transaction, which refuses without writing.
func (f *FixedWindow) incr(ctx context.Context, key string) (d Decision, placed bool, err error) {
	now := f.db.Now().UnixNano()
	noteDecided(ctx, now)
	idx := now / f.window
	left := (idx+1)*f.window - now // until the window ends: at least 1ns
	k := windowKey(f.prefix, key, idx)
	// The key outlives its window by a window, so that a caller whose
	// engine time is a little behind (read before the verb ran, or another
	// process's clock) still finds this window's count, never a fresh one.
	c, err := f.db.Incr(ctx, k, state.TTL(time.Duration(left+f.window)))
	switch {
	case errors.Is(err, state.ErrOverflow):
		// The count is math.MaxInt64: a window of a limit near it, full,
		// that counted its refusals up to there (or a limiter of such a
		// limit under the same prefix did). The Incr wrote nothing; the
		// transaction reads the count and refuses without writing.
		return Decision{}, false, nil
	case errors.Is(err, state.ErrNotInteger):
		return Decision{}, false, fmt.Errorf("fixed window %q: %w: %w", key, ErrBadState, err)
	case err != nil:
		return Decision{}, false, fmt.Errorf("fixed window %q: %w", key, err)
	case c < 1:
		return Decision{}, false, fmt.Errorf("fixed window %q: %w: key %q held %d", key, ErrBadState, k, c-1)
	}
	if f.db.Now().UnixNano() >= (idx+2)*f.window {
		return Decision{}, false, nil
	}
	return f.decision(c, c <= f.limit, left), true, nil
}

// inTx decides a request of n in one Update, by the transaction's time: it
// reads the window's count and adds n only if all n fit.
func (f *FixedWindow) inTx(ctx context.Context, key string, n int64, twoSteps bool) (Decision, error) {
	var (
		k           string
		left, count int64 // count: the window's count after this request, or before it if refused
		allowed     bool
	)
	guess := guessWindow(f.db, f.window)
	err := decide(ctx, f.db, twoSteps, func(tx *state.Tx) error {
		allowed = false // on a store opened from a URL the callback may run again
		now, counted, err := readWindows(ctx, tx, f.prefix, key, guess)
		if err != nil {
			return err
		}
		idx := now / f.window
		left = (idx+1)*f.window - now
		k = windowKey(f.prefix, key, idx)
		c, err := counted(idx)
		count, allowed = c, err == nil && c <= f.limit-n
		return err
	}, func(tx *state.Tx) error {
		if !allowed {
			return nil
		}
		var err error
		count, err = tx.IncrBy(k, n, state.TTL(time.Duration(left+f.window)))
		return err
	})
	if err != nil {
		return Decision{}, fmt.Errorf("fixed window %q: %w", key, err)
	}
	return f.decision(count, allowed, left), nil
}

// decision is the answer for a window whose count is count (after the
// request if allowed), left before it ends.
func (f *FixedWindow) decision(count int64, allowed bool, left int64) Decision {
	// count is at least 1: an allowed request counted itself, and a
	// refused one found no room for n <= limit. So the quota is whole
	// again when the window ends.
	d := Decision{Allowed: allowed, Limit: f.limit, Remaining: max(0, f.limit-count), Reset: time.Duration(left)}
	if !allowed || d.Remaining == 0 {
		d.RetryAfter = time.Duration(left) // a new window starts empty, and n <= limit
	}
	return d.inWholeMillis()
}
