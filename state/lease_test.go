package state_test

import (
	"errors"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeaseGrantsIncreasingTokens(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		l, err := f.db.Lease(f.ctx, "job", "a", 10*time.Second)
		require.NoError(t, err)
		assert.Equal(t, int64(1), l.Token, "the first grant is token 1")
		assert.Equal(t, "job", l.Name)
		assert.Equal(t, "a", l.Owner)
		assert.Equal(t, f.nowMillis()+10_000, l.Expires.UnixMilli())

		_, err = f.db.Lease(f.ctx, "job", "b", time.Second)
		var held *state.LeaseHeldError
		require.ErrorAs(t, err, &held)
		assert.ErrorIs(t, err, state.ErrLeaseHeld)
		assert.Equal(t, "a", held.Owner)
		assert.Equal(t, 10*time.Second, held.Left)

		require.NoError(t, f.db.Release(f.ctx, l))
		l2, err := f.db.Lease(f.ctx, "job", "b", time.Second)
		require.NoError(t, err)
		assert.Equal(t, int64(2), l2.Token, "after release: last token + 1")

		f.clock.Advance(time.Second)
		l3, err := f.db.Lease(f.ctx, "job", "c", time.Second)
		require.NoError(t, err, "an expired lease is free")
		assert.Equal(t, int64(3), l3.Token)

		other, err := f.db.Lease(f.ctx, "other", "c", time.Second)
		require.NoError(t, err)
		assert.Equal(t, int64(1), other.Token, "tokens count per name")
	})
}

func TestLeaseSameOwnerRetryKeepsToken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		l, err := f.db.Lease(f.ctx, "job", "a", time.Second)
		require.NoError(t, err)
		f.clock.Advance(500 * time.Millisecond)
		again, err := f.db.Lease(f.ctx, "job", "a", 3*time.Second)
		require.NoError(t, err)
		assert.Equal(t, l.Token, again.Token, "a retry while live is the same lease")
		assert.Equal(t, f.nowMillis()+3000, again.Expires.UnixMilli(), "its deadline is now+ttl")
		assert.False(t, l.Extended, "the first grant is new")
		assert.True(t, again.Extended, "the retry extended it")

		f.clock.Advance(3 * time.Second)
		after, err := f.db.Lease(f.ctx, "job", "a", time.Second)
		require.NoError(t, err)
		assert.Equal(t, l.Token+1, after.Token, "once expired, the same owner gets a new grant")
		assert.False(t, after.Extended, "at its deadline the lease is free: a new grant")
	})
}

func TestRenew(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		l, err := f.db.Lease(f.ctx, "job", "a", time.Second)
		require.NoError(t, err)
		f.clock.Advance(900 * time.Millisecond)
		require.NoError(t, f.db.Renew(f.ctx, l, 2*time.Second))
		assert.Equal(t, int64(1), l.Token, "renewal never changes the token")
		assert.Equal(t, f.nowMillis()+2000, l.Expires.UnixMilli(), "Renew updates Expires")

		f.clock.Advance(1999 * time.Millisecond)
		require.NoError(t, f.db.Renew(f.ctx, l, time.Second), "still live one ms before the deadline")
		f.clock.Advance(time.Second)
		assert.ErrorIs(t, f.db.Renew(f.ctx, l, time.Second), state.ErrLeaseLost, "expired at its deadline")

		newer, err := f.db.Lease(f.ctx, "job", "b", time.Second)
		require.NoError(t, err)
		assert.ErrorIs(t, f.db.Renew(f.ctx, l, time.Second), state.ErrLeaseLost, "a newer token exists")
		stale := *newer
		stale.Token = newer.Token - 1
		assert.ErrorIs(t, f.db.Renew(f.ctx, &stale, time.Second), state.ErrLeaseLost)
		forged := *newer
		forged.Owner = "mallory"
		assert.ErrorIs(t, f.db.Renew(f.ctx, &forged, time.Second), state.ErrLeaseLost, "owner must match")
		require.NoError(t, f.db.Renew(f.ctx, newer, time.Second))
	})
}

func TestRelease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		l, err := f.db.Lease(f.ctx, "job", "a", time.Second)
		require.NoError(t, err)
		require.NoError(t, f.db.Release(f.ctx, l))
		assert.ErrorIs(t, f.db.Release(f.ctx, l), state.ErrLeaseLost, "released twice")
		assert.ErrorIs(t, f.db.Renew(f.ctx, l, time.Second), state.ErrLeaseLost, "renew after release")

		l2, err := f.db.Lease(f.ctx, "job", "a", time.Second)
		require.NoError(t, err)
		f.clock.Advance(time.Second)
		assert.ErrorIs(t, f.db.Release(f.ctx, l2), state.ErrLeaseLost, "release after expiry")

		// Release keeps the row, so tokens never restart, even across a reopen and a sweep.
		f.reopen()
		_, err = f.db.Sweep(f.ctx)
		require.NoError(t, err)
		l3, err := f.db.Lease(f.ctx, "job", "b", time.Second)
		require.NoError(t, err)
		assert.Equal(t, int64(3), l3.Token)

		// Superseded: a newer grant, to the same owner too, is not ended by
		// the older lease's Release.
		f.clock.Advance(time.Second)
		l4, err := f.db.Lease(f.ctx, "job", "b", time.Second)
		require.NoError(t, err)
		require.Equal(t, int64(4), l4.Token)
		assert.ErrorIs(t, f.db.Release(f.ctx, l3), state.ErrLeaseLost, "release of a superseded lease")
		_, err = f.db.Lease(f.ctx, "job", "c", time.Second)
		assert.ErrorIs(t, err, state.ErrLeaseHeld, "the newer lease is still held")
		require.NoError(t, f.db.Release(f.ctx, l4))
	})
}

func TestLeaseBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		cases := []struct {
			name, lname, owner string
			ttl                time.Duration
			want               error
		}{
			{"empty name", "", "a", time.Second, state.ErrInvalidKey},
			{"empty owner", "job", "", time.Second, state.ErrInvalidArgument},
			{"long owner", "job", stringOf('o', state.MaxKeyBytes+1), time.Second, state.ErrInvalidArgument},
			{"zero ttl", "job", "a", 0, state.ErrInvalidTTL},
			{"negative ttl", "job", "a", -time.Second, state.ErrInvalidTTL},
		}
		for _, c := range cases {
			_, err := f.db.Lease(f.ctx, c.lname, c.owner, c.ttl)
			assert.ErrorIs(t, err, c.want, c.name)
		}
		assert.ErrorIs(t, f.db.Renew(f.ctx, nil, time.Second), state.ErrInvalidArgument)
		assert.ErrorIs(t, f.db.Release(f.ctx, nil), state.ErrInvalidArgument)
		l, err := f.db.Lease(f.ctx, "job", "a", time.Second)
		require.NoError(t, err)
		assert.Equal(t, int64(1), l.Token, "refused calls granted nothing")
		assert.ErrorIs(t, f.db.Renew(f.ctx, l, 0), state.ErrInvalidTTL)
	})
}

func TestLeaseHeldErrorText(t *testing.T) {
	err := error(&state.LeaseHeldError{Name: "job", Owner: "a", Left: 1500 * time.Millisecond})
	assert.Equal(t, `statekit: lease "job" held by "a" for 1.5s more`, err.Error())
	assert.True(t, errors.Is(err, state.ErrLeaseHeld))
}
