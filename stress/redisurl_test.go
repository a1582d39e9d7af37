package stress_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/stress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keysOf returns every key of database db of s, sorted.
func keysOf(t *testing.T, s *redistest.Server, db int) []string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DB: db})
	defer c.Close()
	keys, err := c.Keys(context.Background(), "*").Result()
	require.NoError(t, err)
	slices.Sort(keys)
	return keys
}

// TestRedisURLRunRemovesItsKeys: a run against a caller's server
// (Redis.URL) writes its keys under a prefix of its own, added to the
// URL's, and removes them once the check has read them, and only them:
// the keys the server held before, a key that looks like another run's
// included, stay. So does a run that fails (here, one that reaches its cap
// before its work). Before, every run left its keys and lease hashes on the
// server (15 after a 3 s run), and nightly runs against a shared server
// piled them up.
func TestRedisURLRunRemovesItsKeys(t *testing.T) {
	cfg := shortRedis(t)
	s := redistest.Start(t)
	const db = 3
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DB: db})
	defer c.Close()
	ctx := context.Background()
	before := []string{"app:k:mine", "app:lease:mine", "app:stress:1:0:k:e0/n0", "app:stress:", "other", "stress:1:0:k:e0/n0"}
	for _, k := range before {
		require.NoError(t, c.Set(ctx, k, "i:1", 0).Err())
	}
	require.NoError(t, redis.NewClient(&redis.Options{Addr: s.Addr()}).Set(ctx, "db0", "x", 0).Err())
	slices.Sort(before)
	cfg.Redis = &stress.Redis{URL: fmt.Sprintf("redis://%s/%d?prefix=app:", s.Addr(), db)}
	cfg.Until = stress.Work{Calls: 300, Kills: 2, Grants: 10}
	cfg.KillEvery = 100 * time.Millisecond
	rep := runRedis(t, cfg)
	assert.True(t, rep.OK(), "violations: %v", rep.Violations)
	assert.Positive(t, rep.Fenced, "the run took leases")
	assertKeysRemoved(t, rep, s, db, before)

	// A run that fails: it cannot do its work before its cap.
	failing := cfg
	failing.Dir = t.TempDir()
	failing.Duration = time.Second
	failing.Until = stress.Work{Calls: 1 << 40}
	rep = run(t, failing)
	assert.True(t, rep.Has(stress.KindShortRun), "%v", rep.Violations)
	assert.False(t, rep.OK())
	assertKeysRemoved(t, rep, s, db, before)
}

// assertKeysRemoved asserts that the run rep reports removing its keys,
// under a prefix that follows the URL's "app:", and that database db of s
// holds the keys before, and database 0 only "db0".
func assertKeysRemoved(t *testing.T, rep *stress.Report, s *redistest.Server, db int, before []string) {
	t.Helper()
	assert.Positive(t, rep.KeysRemoved)
	assert.Empty(t, rep.KeysLeft)
	assert.True(t, strings.HasPrefix(rep.RedisPrefix, "app:stress:1:"), "the run's prefix follows the URL's: %q", rep.RedisPrefix)
	assert.Equal(t, before, keysOf(t, s, db), "the run's keys are gone, and only they")
	assert.Equal(t, []string{"db0"}, keysOf(t, s, 0), "another database is not touched")
}
