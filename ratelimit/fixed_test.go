package ratelimit_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/statekit/statekit/ratelimit"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireRefusedAtTheLargestCount fills a fixed window of a limit of
// math.MaxInt64-2 on db, then asks for requests of one past it until the
// count is math.MaxInt64 and beyond: each is refused, with no error, and
// the count stays at math.MaxInt64. It returns the refusals.
func requireRefusedAtTheLargestCount(t *testing.T, db *state.DB, window time.Duration) []ratelimit.Decision {
	t.Helper()
	const limit = math.MaxInt64 - 2
	f, err := ratelimit.NewFixedWindow(db, limit, window)
	require.NoError(t, err)
	d := decide(t, f, "k", limit)
	require.True(t, d.Allowed, "the whole limit at once")
	require.Zero(t, d.Remaining)
	var refusals []ratelimit.Decision
	for i := range 4 {
		d, err := f.Allow(t.Context(), "k")
		require.NoError(t, err, "request %d past the limit: a refusal, not an error", i+1)
		assert.False(t, d.Allowed, "request %d past the limit", i+1)
		refusals = append(refusals, d)
	}
	d, err = f.AllowN(t.Context(), "k", 2)
	require.NoError(t, err, "a request of 2 past the limit")
	assert.False(t, d.Allowed, "a request of 2 past the limit")
	var counts []int64
	require.NoError(t, db.Scan(t.Context(), "ratelimit:fixed:k:", false, func(k state.KeyInfo) error {
		n, ok := k.Value.Int()
		require.True(t, ok, "%s holds %v", k.Key, k.Value)
		counts = append(counts, n)
		return nil
	}))
	assert.Equal(t, []int64{math.MaxInt64}, counts, "the refusals counted up to the largest count, and no further")
	return refusals
}

// TestFixedWindowRefusesAtTheLargestCount: a fixed window counts a refused
// request of one (its single Incr), so a window of a limit near
// math.MaxInt64, full, counts its refusals up to math.MaxInt64, which the
// Incr cannot add to. The request is then decided in a transaction, which
// reads the count and refuses without writing. Before, the Incr's overflow
// was ErrBadState, blaming another program for a count the limiter wrote:
// with a limit of math.MaxInt64-2, the third request past it failed.
func TestFixedWindowRefusesAtTheLargestCount(t *testing.T) {
	db, _ := openDB(t)
	for i, d := range requireRefusedAtTheLargestCount(t, db, time.Hour) {
		check(t, d, math.MaxInt64-2, want{false, 0, time.Hour, time.Hour}, fmt.Sprintf("request %d past the limit: refused until the window ends", i+1))
	}
}
