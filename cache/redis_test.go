package cache_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/cache"
	"github.com/statekit/statekit/internal/redistest"
	_ "github.com/statekit/statekit/redisstate" // the workers open redis:// URLs
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProcessesShareOneFillOnRedis is TestProcessesShareOneFill over a
// real redis-server: GetOrCompute runs on the verbs alone, so each key's
// fn runs once for every caller of every process on either backend.
func TestProcessesShareOneFillOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	requireOneFill(t, redistest.Start(t).URL("cache:"))
}

// TestNonDurableRedisIsRefusedBeforeComputing: a fill holds a lease, and
// Lease refuses a Redis server that may lose an acknowledged write
// (appendonly no) or evict keys (an allkeys-lru cache server) with
// state.ErrNotDurable. GetOrCompute returns it on a miss and computes
// nothing; with allow_unsafe_leases=true in the URL it fills as usual.
func TestNonDurableRedisIsRefusedBeforeComputing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	for name, opts := range map[string][]redistest.Option{
		"appendonly no": {redistest.WithoutPersistence()},
		"allkeys-lru":   {redistest.WithArgs("--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")},
	} {
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t, opts...)
			ctx := capped(t)
			var calls atomic.Int64
			db, err := state.Open(srv.URL("c:"))
			require.NoError(t, err)
			defer db.Close()
			v, err := cache.GetOrCompute(ctx, db, "k", time.Minute, counting(&calls, "v"))
			assert.ErrorIs(t, err, state.ErrNotDurable)
			assert.Nil(t, v)
			assert.Zero(t, calls.Load(), "nothing computed")

			unsafe, err := state.Open(srv.URL("c:") + "&allow_unsafe_leases=true")
			require.NoError(t, err)
			defer unsafe.Close()
			v, err = cache.GetOrCompute(ctx, unsafe, "k", time.Minute, counting(&calls, "v"))
			require.NoError(t, err)
			assert.Equal(t, "v", string(v))
			assert.EqualValues(t, 1, calls.Load())
		})
	}
}

// TestGetOrComputeOnARedisCluster: a fill releases its lease (cache:KEY) in
// the Update that writes KEY, so in a Redis Cluster the two must share a
// hash slot: a store prefix with a hash tag, or a tag in the key, fills as
// on one server; without either the fill fails with
// state.ErrInvalidArgument naming the slots and the cure, writes nothing,
// and releases its lease.
func TestGetOrComputeOnARedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3)
	ctx := capped(t)
	for _, store := range []struct{ prefix, key string }{
		{"{c}:", "report:daily"}, // the whole store in one slot
		{"c:", "{report}:daily"}, // the key's own hash tag
	} {
		db, err := state.Open(c.URL(store.prefix))
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		var calls atomic.Int64
		for range 2 {
			v, err := cache.GetOrCompute(ctx, db, store.key, time.Minute, counting(&calls, "v"))
			require.NoError(t, err, store.prefix+store.key)
			assert.Equal(t, "v", string(v))
		}
		assert.EqualValues(t, 1, calls.Load(), "%s%s: computed once", store.prefix, store.key)
	}

	db, err := state.Open(c.URL("c:"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	var calls atomic.Int64
	_, err = cache.GetOrCompute(ctx, db, "report:weekly", time.Minute, counting(&calls, "v"), cache.WithMaxWait(0))
	require.ErrorIs(t, err, state.ErrInvalidArgument)
	assert.ErrorContains(t, err, "hash tag")
	_, err = db.Get(ctx, "report:weekly")
	assert.ErrorIs(t, err, state.ErrNotFound, "nothing written")
	_, err = cache.GetOrCompute(ctx, db, "report:weekly", time.Minute, counting(&calls, "v"), cache.WithMaxWait(0))
	assert.ErrorIs(t, err, state.ErrInvalidArgument, "the lease was released: the next call fails the same way, not waiting")
}

// TestDelDuringAFillDoesNotStopItOnRedis is TestDelDuringAFillDoesNotStopIt
// over a real redis-server: GetOrCompute runs on the verbs alone, so a Del
// during a fill does not stop it there either.
func TestDelDuringAFillDoesNotStopItOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	db, err := state.Open(redistest.Start(t).URL("c:"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	requireDelDuringAFillWritesTheOldValue(t, db, time.Hour)
	left, err := db.TTL(t.Context(), "report")
	require.NoError(t, err)
	assert.Greater(t, left, 59*time.Minute, "the old value lives its ttl")
}
