package stress_test

import (
	"testing"
	"time"

	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/internal/redistest"
	_ "github.com/statekit/statekit/redisstate" // the workers open redis:// URLs
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/stress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shortRedis is a Redis run to a count of work: worker kills, server kills
// each followed by a restart, grants and calls. It stops as soon as it has
// done all of it, and fails at testCap, saying what it did.
func shortRedis(t *testing.T) stress.Config {
	t.Helper()
	if redistest.Binary() == "" {
		t.Skipf("redis-server not installed: skipping %s; .ci/run installs it", t.Name())
	}
	return stress.Config{
		Dir:        t.TempDir(),
		Processes:  3,
		Duration:   testCap,
		Until:      stress.Work{Calls: 3000, Kills: 6, Grants: 50, Contended: 5, ServerKills: 2},
		KillEvery:  200 * time.Millisecond,
		EpochEvery: time.Second,
		Seed:       1,
		Redis:      &stress.Redis{KillEvery: 700 * time.Millisecond},
	}
}

// runRedis runs cfg, skipping (in one line) while the redis backend does
// not report the server time its verbs ran at, without which nothing can
// be checked.
func runRedis(t *testing.T, cfg stress.Config) *stress.Report {
	t.Helper()
	s := redistest.Start(t)
	db, err := state.Open(s.URL("probe:"))
	require.NoError(t, err)
	var now int64
	_, err = db.Get(hooks.WithNow(t.Context(), func(ms int64) { now = ms }), "k")
	require.ErrorIs(t, err, state.ErrNotFound)
	require.NoError(t, db.Close())
	s.Kill()
	require.NotZero(t, now, "%v: the Redis backend stopped reporting the server's time, which the check needs", stress.ErrNoServerTime)
	return run(t, cfg)
}

func TestRedisStressRunFindsNothing(t *testing.T) {
	rep := runRedis(t, shortRedis(t))
	assert.True(t, rep.OK(), "violations: %v", rep.Violations)
	assert.Equal(t, stress.StoppedWork, rep.Stopped)
	assert.Equal(t, rep.Processes+rep.Kills, rep.Started, "each kill restarted its worker")
	assert.GreaterOrEqual(t, rep.ServerKills, 2)
	assert.Positive(t, rep.Fenced)
	assert.Positive(t, rep.Flushes, "buffered increments were flushed")
	assert.Contains(t, rep.Linearizability, "Ok")
	assert.NotEmpty(t, rep.Redis)
}

// TestRedisWithoutPersistenceLosesTokens is the negative control: the same
// run on a server with appendonly no (the workers' URL says
// allow_unsafe_leases=true, or Lease would refuse it). A SIGKILL loses
// everything the server held, lease hashes included, so the first grant
// after a restart starts the token over at 1: a token that an earlier
// holder already had. The run must catch it: a token granted to two
// owners, or accepted by the fenced resource from two holders.
func TestRedisWithoutPersistenceLosesTokens(t *testing.T) {
	cfg := shortRedis(t)
	cfg.Redis.NoPersistence = true
	cfg.Until = stress.Work{Calls: 1500, Grants: 50, ServerKills: 2}
	rep := runRedis(t, cfg)
	assert.True(t, rep.Has(stress.KindDuplicateToken), "a restart without persistence hands out a token twice, in %d grants over %d server restarts: %v",
		rep.Done.Grants, rep.ServerKills, rep.Violations)
	assert.False(t, rep.OK())
}

func TestRedisRunRefusesABadConfig(t *testing.T) {
	for _, cfg := range []stress.Config{
		{Dir: t.TempDir(), Redis: &stress.Redis{}, StepClock: true, Goroutines: 1},
		{Dir: t.TempDir(), Redis: &stress.Redis{URL: "redis://127.0.0.1:1/0"}, Until: stress.Work{ServerKills: 1}},
		{Dir: t.TempDir(), Redis: &stress.Redis{URL: "redis://127.0.0.1:1/0", NoPersistence: true}},
		{Dir: t.TempDir(), Redis: &stress.Redis{KillEvery: -1}, Until: stress.Work{ServerKills: 1}},
		{Dir: t.TempDir(), Until: stress.Work{ServerKills: 1}},
		{Dir: t.TempDir(), Until: stress.Work{ServerKills: -1}},
	} {
		_, err := stress.Run(t.Context(), cfg)
		require.ErrorIs(t, err, stress.ErrConfig, "%+v", cfg)
	}
}

// TestRedisURLThatRefusesLeasesIsRefused: a server of the caller's that
// Lease refuses (appendonly no, and no allow_unsafe_leases in the URL)
// stops the run before it starts, with Lease's reason. Before, every
// grant failed as an engine error, each an unknown op, and the check
// searched those histories for many minutes (10 at least, on a 3 s run)
// before it said anything.
func TestRedisURLThatRefusesLeasesIsRefused(t *testing.T) {
	cfg := shortRedis(t)
	s := redistest.Start(t, redistest.WithoutPersistence())
	cfg.Redis = &stress.Redis{URL: s.URL("")}
	cfg.Until = stress.Work{Calls: 50}
	cfg.KillEvery = -1
	_, err := stress.Run(t.Context(), cfg)
	require.ErrorIs(t, err, state.ErrNotDurable)
	assert.Contains(t, err.Error(), "allow_unsafe_leases=true")
}
