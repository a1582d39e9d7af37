package state_test

import (
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExpire(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		ok, err := f.db.Expire(f.ctx, "missing", time.Second)
		require.NoError(t, err)
		assert.False(t, ok, "absent key")

		require.NoError(t, f.db.Set(f.ctx, "k", "v"))
		ok, err = f.db.Expire(f.ctx, "k", 2*time.Second)
		require.NoError(t, err)
		assert.True(t, ok)
		left, err := f.db.TTL(f.ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, 2*time.Second, left)

		f.clock.Advance(1500 * time.Millisecond)
		left, err = f.db.TTL(f.ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, 500*time.Millisecond, left)

		ok, err = f.db.Expire(f.ctx, "k", time.Hour)
		require.NoError(t, err)
		assert.True(t, ok, "a live key's deadline can move later")
		f.clock.Advance(time.Hour)
		ok, err = f.db.Expire(f.ctx, "k", time.Hour)
		require.NoError(t, err)
		assert.False(t, ok, "an expired key is absent to Expire")
	})
}

func TestExpireNonPositiveDeletes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		for _, ttl := range []time.Duration{0, -time.Second} {
			require.NoError(t, f.db.Set(f.ctx, "k", "v"))
			ok, err := f.db.Expire(f.ctx, "k", ttl)
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, "<absent>", f.get("k"))
			ok, err = f.db.Expire(f.ctx, "k", ttl)
			require.NoError(t, err)
			assert.False(t, ok, "nothing left to delete")
		}
	})
}

func TestTTLAnswers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		_, err := f.db.TTL(f.ctx, "missing")
		assert.ErrorIs(t, err, state.ErrNotFound)
		require.NoError(t, f.db.Set(f.ctx, "k", 1))
		left, err := f.db.TTL(f.ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, state.NoExpiry, left)
	})
}
