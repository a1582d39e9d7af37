package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/statekit/statekit/state"
)

// TokenBucket is a token bucket per key, kept as GCRA (the generic cell rate
// algorithm): the bucket refills at limit tokens per window, one every
// window/limit (the emission interval), and holds at most burst tokens (the
// limit unless WithBurst says otherwise); a request of n takes n tokens or
// is refused. GCRA keeps the whole bucket as one integer, the theoretical
// arrival time (TAT): the time the bucket would be full again. A request of
// n at now is allowed if max(TAT, now) + n*interval - now <= burst*interval,
// and moves TAT there.
//
// Each decision reads the TAT and writes it back in one Update, at that
// transaction's time (now above), exact across goroutines and processes. A
// refused request writes nothing. A TAT more than a capacity ahead of now
// (written by a bucket of a larger burst under the same prefix, or by a
// process whose engine time is ahead) is an empty bucket that refills from
// that TAT: the refusal's RetryAfter and Reset count from it, so waiting
// RetryAfter is enough there too. The key expires one capacity
// (burst*interval) after the bucket is full again, so an idle client costs
// no row for long, and a process whose clock is a little behind never finds
// the bucket gone before it is full.
//
// The emission interval is whole nanoseconds (window/limit rounded down), so
// a rate that does not divide evenly refills a hair faster than stated: 3
// per second refills every 333,333,333 ns.
type TokenBucket struct {
	db       *state.DB
	limit    int64 // the rate: tokens per window
	burst    int64 // capacity in tokens
	interval int64 // nanoseconds per token
	tau      int64 // burst*interval: capacity in time
	prefix   string
}

var _ Limiter = (*TokenBucket)(nil)

// NewTokenBucket returns a limiter that refills limit tokens per window per
// key and holds up to the limit (or WithBurst) tokens. The window is at least
// a millisecond and at most 50 years; the limit at least 1 and at most one
// token per nanosecond of window; the burst refills in at most 50 years, and
// holds at least a millisecond of the rate (burst*window >= limit*1ms): the
// engine's time moves in whole milliseconds, so a bucket allows at most its
// burst per millisecond, and a smaller one would run slower than stated (the
// error names the smallest burst that runs at the rate). Its keys start with
// "ratelimit:bucket:" unless WithPrefix says otherwise.
func NewTokenBucket(db *state.DB, limit int64, window time.Duration, opts ...Option) (*TokenBucket, error) {
	c, err := newConfig("bucket", db, limit, window, bucketKeyRoom, opts)
	if err != nil {
		return nil, fmt.Errorf("token bucket: %w", err)
	}
	interval := int64(window) / limit
	if interval == 0 {
		return nil, fmt.Errorf("token bucket: %w: %d per %v is more than one token per nanosecond", ErrInvalidConfig, limit, window)
	}
	burst := limit
	if c.burst != 0 {
		burst = c.burst
	}
	if burst > int64(maxSpan)/interval {
		return nil, fmt.Errorf("token bucket: %w: burst %d at one token per %v takes more than %v to refill",
			ErrInvalidConfig, burst, time.Duration(interval), maxSpan)
	}
	// The engine's time moves in whole milliseconds, so a bucket refills
	// at most its burst per millisecond: one that holds less than a
	// millisecond of its rate (burst*window < limit*1ms) would run slower
	// than stated. The smallest burst that runs at the rate holds a
	// millisecond of it: ceil(limit*1ms/window).
	if most := mul(uint64(limit), uint64(time.Millisecond)); most.greater(mul(uint64(burst), uint64(window))) {
		return nil, fmt.Errorf("token bucket: %w: burst %d at %d per %v refills in %v, want at least 1ms "+
			"(the engine's time is whole milliseconds, so the bucket would allow at most %d per millisecond): "+
			"use a burst of at least %d",
			ErrInvalidConfig, burst, limit, window, time.Duration(mul(uint64(burst), uint64(window)).floorDiv(uint64(limit))),
			burst, most.ceilDiv(uint64(window)))
	}
	return &TokenBucket{db: db, limit: limit, burst: burst, interval: interval, tau: burst * interval, prefix: c.prefix}, nil
}

// Allow decides one request under key.
func (b *TokenBucket) Allow(ctx context.Context, key string) (Decision, error) {
	return b.AllowN(ctx, key, 1)
}

// AllowN decides a request of n tokens (1 <= n <= burst) under key.
func (b *TokenBucket) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	if b == nil || b.db == nil {
		return Decision{}, unmade("TokenBucket")
	}
	if err := checkRequest(key, n, b.burst, b.prefix, bucketKeyRoom); err != nil {
		return Decision{}, err
	}
	k := b.prefix + key
	var now, tat, newTAT int64
	allowed := false
	err := decide(ctx, b.db, twoStepsOn(ctx), func(tx *state.Tx) error {
		// On a store opened from a URL the callback may run again after a
		// conflict: only the last run's answer counts.
		allowed = false
		var err error
		if tat, err = storedInt(tx, k); err != nil {
			return err
		}
		// The time after the read: in a Redis Cluster the transaction has
		// its time only once it has touched a key.
		if now, err = decidedAt(ctx, tx); err != nil {
			return err
		}
		tat = max(tat, now)
		if tat-now > b.tau {
			// Written by a process whose engine time is ahead of ours,
			// or by a bucket of a larger capacity: an empty bucket that
			// refills from the time it holds, so the request is refused
			// and its answer counts from that time. A refusal writes
			// nothing, so an answer from a time clamped to now+tau
			// would be the same at every call until the clock caught
			// up: a RetryAfter that was never enough. Another
			// program's time is an error, not a bucket refused for ever.
			return b.checkAhead(tx, k, tat-now)
		}
		newTAT = tat + n*b.interval
		allowed = newTAT-now <= b.tau // else refused: nothing written
		return nil
	}, func(tx *state.Tx) error {
		if !allowed {
			return nil
		}
		// The row outlives the time the bucket is full again by one
		// capacity, as a window's count outlives its window by a window:
		// a process whose engine time is a little behind still finds the
		// bucket, never a full one before its time.
		return tx.Set(k, newTAT, state.TTL(time.Duration(newTAT-now+b.tau)))
	})
	if err != nil {
		return Decision{}, fmt.Errorf("token bucket %q: %w", key, err)
	}
	d := Decision{Allowed: allowed, Limit: b.burst}
	if allowed {
		d.Remaining = (now + b.tau - newTAT) / b.interval
		d.Reset = time.Duration(newTAT - now)
		if d.Remaining == 0 {
			d.RetryAfter = time.Duration(newTAT + b.interval - b.tau - now)
		}
	} else {
		// From the stored time, however far ahead of a capacity it is:
		// tat-now may exceed tau, so the differences are taken in an
		// order that cannot overflow (n*interval <= tau), and newTAT,
		// which a time near the end of int64 would overflow, is not used.
		d.Remaining = max(0, (now+b.tau-tat)/b.interval)
		d.Reset = time.Duration(tat - now)
		d.RetryAfter = time.Duration((tat - now) - (b.tau - n*b.interval))
	}
	return d.inWholeMillis(), nil
}

// checkAhead checks row k, whose TAT is ahead nanoseconds past the
// transaction's time, more than a capacity: every bucket writes its TAT
// with a deadline a capacity past it, so a row without a deadline, or with
// one before the time it holds, is not a bucket's. Such a row would refuse
// every request until it expired, if ever: it is ErrBadState.
func (b *TokenBucket) checkAhead(tx *state.Tx, k string, ahead int64) error {
	left, err := tx.TTL(k)
	switch {
	case err != nil:
		return err
	case left == state.NoExpiry:
		return fmt.Errorf("%w: key %q holds a time %v ahead, with no deadline", ErrBadState, k, time.Duration(ahead))
	case int64(left) < ahead-int64(time.Millisecond): // a millisecond's slack for a deadline read in whole ones
		return fmt.Errorf("%w: key %q holds a time %v ahead, with a deadline %v ahead", ErrBadState, k, time.Duration(ahead), left)
	}
	return nil
}
