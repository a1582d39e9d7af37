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

// TestKeyExpiringDuringATransactionIsLiveToEveryVerb: every verb of an
// Update runs at the transaction's time (Tx.Now), so a key whose deadline
// passes while the callback runs is live to each verb in it, read or
// write, and gone to the first verb after it; so is a lease's.
func TestKeyExpiringDuringATransactionIsLiveToEveryVerb(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "k", 1, state.TTL(10*time.Millisecond)))
		require.NoError(t, f.db.Set(f.ctx, "gone", 1, state.TTL(10*time.Millisecond)))
		held, err := f.db.Lease(f.ctx, "job", "a", 10*time.Millisecond)
		require.NoError(t, err)
		released, err := f.db.Lease(f.ctx, "other", "a", 10*time.Millisecond)
		require.NoError(t, err)
		require.NoError(t, f.db.Update(f.ctx, func(tx *state.Tx) error {
			v, err := tx.Get("k")
			require.NoError(t, err)
			assert.Equal(t, state.IntValue(1), v)
			f.clock.Advance(20 * time.Millisecond) // past both deadlines, inside the callback
			v, err = tx.Get("k")
			require.NoError(t, err, "still the transaction's time")
			assert.Equal(t, state.IntValue(1), v)
			left, err := tx.TTL("k")
			require.NoError(t, err)
			assert.Equal(t, 10*time.Millisecond, left, "time left at the transaction's time")
			n, err := tx.Incr("k")
			require.NoError(t, err)
			assert.Equal(t, int64(2), n, "counts on, never starts over")
			ok, err := tx.CAS("k", 2, 3)
			require.NoError(t, err)
			assert.True(t, ok, "the live value swaps")
			ok, err = tx.Expire("k", 15*time.Millisecond)
			require.NoError(t, err)
			assert.True(t, ok, "a live key's deadline moves")
			deleted, err := tx.Del("gone")
			require.NoError(t, err)
			assert.Equal(t, 1, deleted, "a live key counts as deleted")
			_, err = tx.Lease("job", "b", time.Second)
			assert.ErrorIs(t, err, state.ErrLeaseHeld, "a live lease is held against another owner")
			again, err := tx.Lease("job", "a", 10*time.Millisecond)
			require.NoError(t, err)
			assert.Equal(t, held.Token, again.Token, "its owner's retry is the same lease")
			require.NoError(t, tx.Renew(held, 15*time.Millisecond), "a live lease renews")
			require.NoError(t, tx.Release(released), "a live lease releases")
			return nil
		}))
		// After it, the engine's time is 20 ms on: the new deadline (15 ms
		// from the transaction's time) has passed too.
		assert.Equal(t, "<absent>", f.get("k"))
		_, err = f.db.TTL(f.ctx, "k")
		assert.ErrorIs(t, err, state.ErrNotFound)
		assert.ErrorIs(t, f.db.Renew(f.ctx, held, time.Second), state.ErrLeaseLost, "and so has the renewed lease's")
	})
}
