package ratelimit_test

import (
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	_ "github.com/statekit/statekit/redisstate" // the workers open redis:// URLs
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProcessesAreAllowedExactlyTheLimitOnRedis is
// TestProcessesAreAllowedExactlyTheLimit over a real redis-server: the
// limiters run on the verbs alone, so they are exact on either backend.
// The sliding window and the token bucket are one Update each, optimistic
// on Redis: conflicting decisions run again, and still the limit holds.
func TestProcessesAreAllowedExactlyTheLimitOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	srv := redistest.Start(t)
	for _, kind := range []string{"fixed", "sliding", "bucket"} {
		t.Run(kind, func(t *testing.T) {
			requireExactLimit(t, kind, srv.URL("rl-"+kind+":"))
		})
	}
}

// TestLimitersDecideOnARedisCluster: in a Redis Cluster a transaction has a
// time only once it has touched a key (each master keeps its own clock), and
// a window limiter's key names the window its time falls in. Every limiter
// decides requests of one and of more there, on a store whose prefix puts it
// in one slot and on a key with a hash tag of its own (the two windows of a
// sliding window must share a slot). Before, the window limiters asked for
// the time before any key: every sliding window decision, and a fixed
// window's request of more than one, failed with ErrInvalidArgument.
func TestLimitersDecideOnARedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3)
	// No window edge before 2070, and a token in 16 years: the decisions
	// below fall in one window whatever the machine's speed.
	const window = fiftyYears
	for _, store := range []struct{ prefix, key string }{
		{"{rl}:", "alice"}, // the whole store in one slot
		{"rl:", "{bob}"},   // the key's own hash tag
	} {
		db, err := state.Open(c.URL(store.prefix))
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		for name, l := range limiters(t, db, 3, window) {
			what := name + " on " + store.prefix + store.key
			d, err := l.AllowN(t.Context(), store.key, 1)
			require.NoError(t, err, what)
			assert.True(t, d.Allowed, what)
			assert.EqualValues(t, 2, d.Remaining, what)
			d, err = l.AllowN(t.Context(), store.key, 2)
			require.NoError(t, err, what)
			assert.True(t, d.Allowed, what)
			assert.Zero(t, d.Remaining, what)
			for _, n := range []int64{1, 2} {
				d, err = l.AllowN(t.Context(), store.key, n)
				require.NoError(t, err, what)
				assert.False(t, d.Allowed, "%s: %d past the limit", what, n)
			}
		}
	}
}

// TestTokenBucketRefusalCountsFromAStoredTimeAheadOnRedis is
// TestTokenBucketRefusalCountsFromAStoredTimeAhead's lowered burst over a
// real redis-server: the bucket decides in this package's Go over the
// verbs, on either backend. The server's clock cannot be stepped, so a
// token is 20 ms and the test sleeps each RetryAfter: one sleep is enough.
// (Before, each refusal said 20 ms, and the bucket refused about 46 times
// before it had room.) A slower machine only sleeps longer, and waiting
// more than RetryAfter never makes a bucket refuse.
func TestTokenBucketRefusalCountsFromAStoredTimeAheadOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	db, err := state.Open(redistest.Start(t).URL("rl:"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	// Full again 50*20 ms after the bucket of 50 was emptied; to the
	// bucket of 5 (a capacity of 100 ms) a token's room comes 80 ms before.
	small := emptiedByALargerBurst(t, db, 100*time.Millisecond)
	refusals := untilAllowed(t, small, "k", 1, time.Sleep)
	assert.LessOrEqual(t, len(refusals), 1, "one wait of RetryAfter is enough; refused %d times", len(refusals))
	for _, d := range refusals {
		assert.Equal(t, d.Reset-80*time.Millisecond, d.RetryAfter, "RetryAfter counts from the time Reset does: %+v", d)
	}
}

// TestFixedWindowRefusesAtTheLargestCountOnRedis is
// TestFixedWindowRefusesAtTheLargestCount over a real redis-server, whose
// INCR refuses to overflow as the file's does. The window is 50 years, so
// no window edge falls within the test (none before 2070).
func TestFixedWindowRefusesAtTheLargestCountOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	db, err := state.Open(redistest.Start(t).URL("rl:"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	for _, d := range requireRefusedAtTheLargestCount(t, db, fiftyYears) {
		assert.Zero(t, d.Remaining)
		assert.Equal(t, d.Reset, d.RetryAfter, "refused until the window ends: %+v", d)
	}
}
