package redisstate_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// near checks that left is the largest Duration, less the real time the
// test took (the server's clock runs): within a minute of it.
func near(t *testing.T, left time.Duration, what string) {
	t.Helper()
	assert.True(t, left > time.Duration(math.MaxInt64)-time.Minute, "%s: %v (%d)", what, left, int64(left))
}

// The largest TTL is stored in whole milliseconds; the time left that TTL
// and LeaseHeldError report, outside a transaction and in one, and Scan
// and Leases, is clamped to the largest Duration, never a negative one
// from an overflow.
func TestHugeTTLLeftIsClamped(t *testing.T) {
	const most = time.Duration(math.MaxInt64)
	db, _ := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "k", "v", state.TTL(most)))
	left, err := db.TTL(ctx, "k")
	require.NoError(t, err)
	near(t, left, "TTL")

	_, err = db.Lease(ctx, "job", "a", most)
	require.NoError(t, err)
	_, err = db.Lease(ctx, "job", "b", time.Second)
	var held *state.LeaseHeldError
	require.True(t, errors.As(err, &held), "%v", err)
	near(t, held.Left, "LeaseHeldError.Left")

	require.NoError(t, db.Update(ctx, func(tx *state.Tx) error {
		left, err := tx.TTL("k")
		require.NoError(t, err)
		near(t, left, "TTL in a transaction")
		require.NoError(t, tx.Set("w", 1, state.TTL(most)))
		left, err = tx.TTL("w")
		require.NoError(t, err)
		near(t, left, "TTL of a key the transaction wrote")
		_, err = tx.Lease("job", "b", time.Second)
		var held *state.LeaseHeldError
		require.True(t, errors.As(err, &held), "%v", err)
		near(t, held.Left, "LeaseHeldError.Left in a transaction")
		return nil
	}))

	require.NoError(t, db.Scan(ctx, "", false, func(k state.KeyInfo) error {
		near(t, k.Left, "Scan's Left of "+k.Key)
		return nil
	}))
	require.NoError(t, db.Leases(ctx, true, func(l state.LeaseInfo) error {
		near(t, l.Left, "Leases' Left of "+l.Name)
		return nil
	}))
}
