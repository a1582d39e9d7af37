package state_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeasesReportsHeldExpiredAndReleased(t *testing.T) {
	f := newFixture(t, backends[0])
	held, err := f.db.Lease(f.ctx, "held", "a", 10*time.Second)
	require.NoError(t, err)
	_, err = f.db.Lease(f.ctx, "expired", "b", time.Second)
	require.NoError(t, err)
	rel, err := f.db.Lease(f.ctx, "released", "c", time.Second)
	require.NoError(t, err)
	require.NoError(t, f.db.Release(f.ctx, rel))
	rel2, err := f.db.Lease(f.ctx, "released", "d", time.Second)
	require.NoError(t, err)
	require.NoError(t, f.db.Release(f.ctx, rel2))
	f.clock.Advance(3 * time.Second)

	list := func(free bool) []string {
		var got []string
		require.NoError(t, f.db.Leases(f.ctx, free, func(l state.LeaseInfo) error {
			got = append(got, fmt.Sprintf("%s %s %d %v %v", l.Name, l.Owner, l.Token, l.Status, l.Left))
			return nil
		}))
		return got
	}
	assert.Equal(t, []string{"held a 1 held 7s"}, list(false))
	assert.Equal(t, []string{"expired b 1 expired -2s", "held a 1 held 7s", "released d 2 released 0s"}, list(true),
		"free leases keep their last owner and token")

	var l state.LeaseInfo
	require.NoError(t, f.db.Leases(f.ctx, false, func(li state.LeaseInfo) error { l = li; return nil }))
	assert.Equal(t, held.Expires, l.Expires)
	assert.ErrorIs(t, f.db.Leases(f.ctx, true, nil), state.ErrInvalidArgument)
}

func TestLeasesPages(t *testing.T) {
	f := newFixture(t, backends[0])
	const n = 300
	for i := range n {
		_, err := f.db.Lease(f.ctx, fmt.Sprintf("job%03d", i), "a", time.Minute)
		require.NoError(t, err)
	}
	var names []string
	require.NoError(t, f.db.Leases(f.ctx, false, func(l state.LeaseInfo) error {
		names = append(names, l.Name)
		return nil
	}))
	require.Len(t, names, n)
	assert.Equal(t, "job000", names[0])
	assert.Equal(t, "job299", names[n-1])
}
