// Package naivelimit is the rate limit a developer writes in an afternoon on
// statekit's verbs, kept as the baseline that package ratelimit's tests and
// cmd/statebench measure against: read the window's count with Get, compare
// it with the limit, write count+n back with Set. Each verb is atomic, the
// three together are not: two callers that read the same count both see room
// for the last request, and both are allowed. Do not use it; it is here to be
// shown wrong.
package naivelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/statekit/statekit/ratelimit"
	"github.com/statekit/statekit/state"
)

// FixedWindow is a fixed-window limiter by Get, compare, Set.
type FixedWindow struct {
	db     *state.DB
	limit  int64
	window time.Duration
	prefix string
}

var _ ratelimit.Limiter = (*FixedWindow)(nil)

// New returns a naive limiter of limit requests per window, keeping its
// counts under keys that start with "naive:".
func New(db *state.DB, limit int64, window time.Duration) *FixedWindow {
	return &FixedWindow{db: db, limit: limit, window: window, prefix: "naive:"}
}

// Allow decides one request under key.
func (f *FixedWindow) Allow(ctx context.Context, key string) (ratelimit.Decision, error) {
	return f.AllowN(ctx, key, 1)
}

// AllowN decides a request of n under key: Get, compare, Set.
func (f *FixedWindow) AllowN(ctx context.Context, key string, n int64) (ratelimit.Decision, error) {
	now := f.db.Now()
	idx := now.UnixNano() / int64(f.window)
	k := f.prefix + key + ":" + strconv.FormatInt(idx, 10)
	var count int64
	v, err := f.db.Get(ctx, k)
	switch {
	case errors.Is(err, state.ErrNotFound):
	case err != nil:
		return ratelimit.Decision{}, err
	default:
		var ok bool
		if count, ok = v.Int(); !ok {
			return ratelimit.Decision{}, fmt.Errorf("naive: %q is not a count", k)
		}
	}
	d := ratelimit.Decision{Limit: f.limit, Remaining: max(0, f.limit-count)}
	if count+n > f.limit {
		return d, nil
	}
	// The gap: another caller may have read the same count by now.
	if err := f.db.Set(ctx, k, count+n, state.TTL(f.window)); err != nil {
		return ratelimit.Decision{}, err
	}
	d.Allowed, d.Remaining = true, f.limit-count-n
	return d, nil
}
