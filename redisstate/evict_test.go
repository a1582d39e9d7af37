package redisstate_test

import (
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server that may evict keys to make room (a maxmemory limit and a
// policy other than noeviction) could evict a lease's hash, and then hand
// its fencing token out again or grant a held lease twice: Lease refuses
// it, whatever its append-only settings, as it refuses a server that
// loses writes.
func TestLeaseRefusesAServerThatEvicts(t *testing.T) {
	ctx := ctxT(t)
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "allkeys-random", "volatile-ttl"} {
		t.Run(policy, func(t *testing.T) {
			srv := redistest.Start(t, redistest.WithArgs("--maxmemory", "4mb", "--maxmemory-policy", policy))
			db := openURL(t, srv.URL("t:"))
			_, err := db.Lease(ctx, "job", "a", time.Minute)
			require.ErrorIs(t, err, state.ErrNotDurable)
			assert.Contains(t, err.Error(), "maxmemory-policy "+policy)
			assert.Contains(t, err.Error(), "noeviction")
			assert.Contains(t, err.Error(), "allow_unsafe_leases=true")
			err = db.Update(ctx, func(tx *state.Tx) error {
				_, err := tx.Lease("job", "a", time.Minute)
				return err
			})
			require.ErrorIs(t, err, state.ErrNotDurable)

			unsafe := openURL(t, srv.URL("t:")+"&allow_unsafe_leases=true")
			_, err = unsafe.Lease(ctx, "job", "a", time.Minute)
			require.NoError(t, err, "the URL opted out")

			redisCmd(t, srv, "CONFIG", "SET", "maxmemory-policy", "noeviction")
			_, err = db.Lease(ctx, "job", "a", time.Minute)
			require.NoError(t, err, "checked again after a refusal")
		})
	}
	t.Run("no limit", func(t *testing.T) {
		srv := redistest.Start(t, redistest.WithArgs("--maxmemory", "0", "--maxmemory-policy", "allkeys-lru"))
		db := openURL(t, srv.URL("t:"))
		_, err := db.Lease(ctx, "job", "a", time.Minute)
		require.NoError(t, err, "without maxmemory nothing is evicted")
	})
}

// TestReadsWorkPastMaxmemory: a server over its maxmemory (noeviction)
// refuses writes, ErrUnavailable with nothing applied, and still answers
// every read, Get included: Redis refuses every command queued in a MULTI
// there, so Get's transaction was ErrUnavailable "OOM", where a full disk
// leaves a file's reads working.
func TestReadsWorkPastMaxmemory(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "k", "hello", state.TTL(time.Hour)))
	require.NoError(t, db.Set(ctx, "n", 7))
	redisCmd(t, srv, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	redisCmd(t, srv, "CONFIG", "SET", "maxmemory", "1")
	defer redisCmd(t, srv, "CONFIG", "SET", "maxmemory", "0")

	v, err := db.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "hello", v.String())
	v, err = db.Get(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, state.IntValue(7), v)
	_, err = db.Get(ctx, "missing")
	assert.ErrorIs(t, err, state.ErrNotFound)
	d, err := db.TTL(ctx, "k")
	require.NoError(t, err)
	assert.Greater(t, d, 59*time.Minute)

	err = db.Set(ctx, "k", "other")
	require.ErrorIs(t, err, state.ErrUnavailable)
	assert.Contains(t, err.Error(), "OOM")
	v, err = db.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "hello", v.String(), "the refused write applied nothing")
}
