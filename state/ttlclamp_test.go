package state_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The largest TTL is stored in whole milliseconds; the time left that TTL,
// LeaseHeldError, Scan and Leases report is clamped to the largest
// Duration, never a negative one from an overflow.
func TestHugeTTLLeftIsClamped(t *testing.T) {
	const most = time.Duration(math.MaxInt64)
	f := newFixture(t, backends[0])
	require.NoError(t, f.db.Set(f.ctx, "k", "v", state.TTL(most)))
	left, err := f.db.TTL(f.ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, most, left, "TTL")

	_, err = f.db.Lease(f.ctx, "job", "a", most)
	require.NoError(t, err)
	_, err = f.db.Lease(f.ctx, "job", "b", time.Second)
	var held *state.LeaseHeldError
	require.True(t, errors.As(err, &held), "%v", err)
	assert.Equal(t, most, held.Left, "LeaseHeldError.Left")

	require.NoError(t, f.db.Scan(f.ctx, "", false, func(k state.KeyInfo) error {
		assert.Equal(t, most, k.Left, "Scan's Left of %q", k.Key)
		return nil
	}))
	require.NoError(t, f.db.Leases(f.ctx, true, func(l state.LeaseInfo) error {
		assert.Equal(t, most, l.Left, "Leases' Left of %q", l.Name)
		return nil
	}))

	// A TTL that fits is exact.
	require.NoError(t, f.db.Set(f.ctx, "k", "v", state.TTL(100*time.Hour)))
	left, err = f.db.TTL(f.ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, 100*time.Hour, left)
}
