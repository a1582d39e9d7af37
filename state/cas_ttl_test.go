package state_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCASWithTTL is SET NX PX in one verb: CAS with TTL creates a key with a
// deadline only if it is absent, and a swap with TTL sets the new deadline.
func TestCASWithTTL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		ttl := func() time.Duration {
			d, err := f.db.TTL(f.ctx, "k")
			require.NoError(t, err)
			return d
		}
		ok, err := f.db.CAS(f.ctx, "k", nil, "seen", state.TTL(time.Second))
		require.NoError(t, err)
		require.True(t, ok, "an absent key is created")
		assert.Equal(t, time.Second, ttl())

		f.clock.Advance(400 * time.Millisecond)
		ok, err = f.db.CAS(f.ctx, "k", nil, "again", state.TTL(time.Minute))
		require.NoError(t, err)
		assert.False(t, ok, "a live key is not created again")
		assert.Equal(t, "bytes:seen", f.get("k"))
		assert.Equal(t, 600*time.Millisecond, ttl(), "a CAS that did not swap changes no deadline")

		ok, err = f.db.CAS(f.ctx, "k", "seen", "swapped")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, 600*time.Millisecond, ttl(), "a swap without TTL keeps the deadline")

		ok, err = f.db.CAS(f.ctx, "k", "swapped", 7, state.TTL(5*time.Second))
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, 5*time.Second, ttl(), "a swap with TTL sets the new deadline")
		assert.Equal(t, "int:7", f.get("k"))

		ok, err = f.db.CAS(f.ctx, "k", 8, 9, state.TTL(time.Minute))
		require.NoError(t, err)
		assert.False(t, ok, "a live value that differs is not swapped")
		assert.Equal(t, "int:7", f.get("k"))
		assert.Equal(t, 5*time.Second, ttl(), "a swap with TTL that did not match changes no deadline")

		f.clock.Advance(5 * time.Second)
		assert.Equal(t, "<absent>", f.get("k"), "the deadline holds")
		ok, err = f.db.CAS(f.ctx, "k", nil, "back", state.TTL(time.Second))
		require.NoError(t, err)
		assert.True(t, ok, "an expired key counts as absent")
		assert.Equal(t, time.Second, ttl())

		err = f.db.Update(f.ctx, func(tx *state.Tx) error {
			ok, err := tx.CAS("t", nil, "in-tx", state.TTL(2*time.Second))
			require.NoError(t, err)
			require.True(t, ok)
			return nil
		})
		require.NoError(t, err)
		d, err := f.db.TTL(f.ctx, "t")
		require.NoError(t, err)
		assert.Equal(t, 2*time.Second, d, "Tx.CAS takes the TTL too")
	})
}

func TestCASWithTTLBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "k", "a"))
		_, err := f.db.CAS(f.ctx, "k", "a", "b", state.TTL(0))
		assert.ErrorIs(t, err, state.ErrInvalidTTL)
		_, err = f.db.CAS(f.ctx, "k", "a", nil, state.TTL(time.Second))
		assert.ErrorIs(t, err, state.ErrInvalidArgument, "a delete has no value to give a TTL")
		_, err = f.db.CAS(f.ctx, "k", nil, nil, state.TTL(time.Second))
		assert.ErrorIs(t, err, state.ErrInvalidArgument)
		assert.Equal(t, "bytes:a", f.get("k"), "refused input changes nothing")
	})
}

// ExampleDB_CAS_setNX is an idempotency key: the first caller to see a
// webhook delivery records it for a day; a retry of the same delivery finds
// it and does nothing.
func ExampleDB_CAS_setNX() {
	ctx := context.Background()
	db, _, cleanup := exampleDB()
	defer cleanup()
	for _, delivery := range []string{"evt_1", "evt_2", "evt_1"} {
		first, err := db.CAS(ctx, "webhook:"+delivery, nil, "seen", state.TTL(24*time.Hour))
		if err != nil {
			panic(err)
		}
		fmt.Println(delivery, "first:", first)
	}
	// Output:
	// evt_1 first: true
	// evt_2 first: true
	// evt_1 first: false
}
