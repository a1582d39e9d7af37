package ratelimit

import (
	"context"
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
// A request of n > 1 reads the count and adds n only if all n fit, in one
// Update, so a refused big request leaves the room it did not take.
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
// each window. The window is at least a millisecond; the limit at least 1.
// Its keys start with "ratelimit:fixed:" unless WithPrefix says otherwise.
func NewFixedWindow(db *state.DB, limit int64, window time.Duration, opts ...Option) (*FixedWindow, error) {
	c, err := newConfig("fixed", db, limit, window, opts)
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
	if err := checkRequest(key, n, f.limit); err != nil {
		return Decision{}, err
	}
	now, twoSteps := decideAt(ctx, f.db)
	idx := now / f.window
	left := (idx+1)*f.window - now // until the window ends: at least 1ns
	k := windowKey(f.prefix, key, idx)
	// The key outlives its window by a window, so that a caller whose
	// engine time is a little behind (read before the verb ran, or another
	// process's clock) still finds this window's count, never a fresh one.
	ttl := state.TTL(time.Duration(left + f.window))

	var count int64 // the window's count after this request, or before it if refused
	allowed := false
	if n == 1 && !twoSteps {
		c, err := f.db.Incr(ctx, k, ttl)
		if err != nil {
			return Decision{}, fmt.Errorf("fixed window %q: %w", key, err)
		}
		count, allowed = c, c <= f.limit
	} else {
		err := decide(ctx, f.db, twoSteps, func(tx *state.Tx) error {
			c, err := storedInt(tx, k)
			count, allowed = c, err == nil && c <= f.limit-n
			return err
		}, func(tx *state.Tx) error {
			if !allowed {
				return nil
			}
			var err error
			count, err = tx.IncrBy(k, n, ttl)
			return err
		})
		if err != nil {
			return Decision{}, fmt.Errorf("fixed window %q: %w", key, err)
		}
	}

	d := Decision{Allowed: allowed, Limit: f.limit, Remaining: max(0, f.limit-count)}
	if count > 0 {
		d.Reset = time.Duration(left)
	}
	if !allowed || d.Remaining == 0 {
		d.RetryAfter = time.Duration(left) // a new window starts empty, and n <= limit
	}
	return d, nil
}
