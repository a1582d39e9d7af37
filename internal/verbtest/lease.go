package verbtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lease grants name to owner for ttl, checking the grant's fields and
// its deadline against the store's time around the call.
func (e *env) lease(name, owner string, ttl time.Duration) *state.Lease {
	e.t.Helper()
	before := e.db.Now()
	l, err := e.db.Lease(e.ctx, name, owner, ttl)
	after := e.db.Now()
	require.NoError(e.t, err, "lease %q to %q", name, owner)
	require.NotNil(e.t, l)
	assert.Equal(e.t, name, l.Name)
	assert.Equal(e.t, owner, l.Owner)
	e.bracket(l.Expires, before, after, ttl, "Lease's Expires")
	return l
}

// leaseCases: Lease, Renew and Release, and fencing tokens.
var leaseCases = []verbCase{
	{"lease/grant-held-release-tokens", func(t *testing.T, e *env) {
		l := e.lease("job", "a", time.Hour)
		assert.Equal(t, int64(1), l.Token, "the first grant is token 1")
		assert.False(t, l.Extended, "a new grant")

		_, err := e.db.Lease(e.ctx, "job", "b", time.Minute)
		var held *state.LeaseHeldError
		require.ErrorAs(t, err, &held)
		assert.ErrorIs(t, err, state.ErrLeaseHeld)
		assert.ErrorContains(t, err, `lease "job"`)
		assert.Equal(t, "job", held.Name)
		assert.Equal(t, "a", held.Owner)
		assert.Positive(t, held.Left)
		assert.LessOrEqual(t, held.Left, time.Hour)
		assert.Equal(t, l.Expires.UnixMilli(), held.Expires.UnixMilli(), "the holder's deadline")

		require.NoError(t, e.db.Release(e.ctx, l))
		l2 := e.lease("job", "b", time.Minute)
		assert.Equal(t, int64(2), l2.Token, "after release: last token + 1")
		assert.False(t, l2.Extended, "a new grant")
		require.NoError(t, e.db.Release(e.ctx, l2))
		l3 := e.lease("job", "a", time.Minute)
		assert.Equal(t, int64(3), l3.Token, "the first owner again: token + 1")

		other := e.lease("other", "c", time.Minute)
		assert.Equal(t, int64(1), other.Token, "tokens count per name")
	}},

	{"lease/same-owner-regrant", func(t *testing.T, e *env) {
		l := e.lease("job", "a", time.Minute)
		assert.False(t, l.Extended, "a new grant")
		again := e.lease("job", "a", time.Hour)
		assert.Equal(t, l.Token, again.Token, "a retry while live is the same lease")
		assert.True(t, again.Extended, "the same owner's live lease, extended")
		assert.True(t, again.Expires.After(l.Expires), "with the deadline moved to now+ttl")
		shorter := e.lease("job", "a", time.Second)
		assert.Equal(t, l.Token, shorter.Token)
		assert.True(t, shorter.Extended)
		assert.True(t, shorter.Expires.Before(again.Expires), "even earlier: the deadline is now+ttl")
		_, err := e.db.Lease(e.ctx, "job", "b", time.Minute)
		assert.ErrorIs(t, err, state.ErrLeaseHeld)
	}},

	{"lease/renew", func(t *testing.T, e *env) {
		l := e.lease("job", "a", time.Minute)
		first := l.Expires
		before := e.db.Now()
		require.NoError(t, e.db.Renew(e.ctx, l, time.Hour))
		after := e.db.Now()
		assert.Equal(t, int64(1), l.Token, "renewal never changes the token")
		assert.True(t, l.Expires.After(first), "Renew moves Expires")
		e.bracket(l.Expires, before, after, time.Hour, "Renew's Expires")
		ls := e.leases(false)
		require.Len(t, ls, 1)
		assert.Equal(t, l.Expires.UnixMilli(), ls[0].Expires.UnixMilli(), "the store keeps the renewed deadline")
		assert.Equal(t, int64(1), ls[0].Token)

		require.NoError(t, e.db.Renew(e.ctx, l, time.Minute), "Renew may move the deadline earlier too")
		_, err := e.db.Lease(e.ctx, "job", "b", time.Minute)
		var held *state.LeaseHeldError
		require.ErrorAs(t, err, &held, "a renewed lease is still held")
		assert.Equal(t, l.Expires.UnixMilli(), held.Expires.UnixMilli())

		stale := *l
		stale.Token = l.Token + 1
		assert.ErrorIs(t, e.db.Renew(e.ctx, &stale, time.Second), state.ErrLeaseLost, "a token not granted")
		forged := *l
		forged.Owner = "mallory"
		assert.ErrorIs(t, e.db.Renew(e.ctx, &forged, time.Second), state.ErrLeaseLost, "owner must match")
		assert.ErrorIs(t, e.db.Release(e.ctx, &forged), state.ErrLeaseLost, "owner must match")
		unknown := *l
		unknown.Name = "never"
		assert.ErrorIs(t, e.db.Renew(e.ctx, &unknown, time.Second), state.ErrLeaseLost, "a name never granted")
		assert.ErrorIs(t, e.db.Release(e.ctx, &unknown), state.ErrLeaseLost, "a name never granted")
		require.NoError(t, e.db.Renew(e.ctx, l, time.Minute), "failed forgeries did not end it")
	}},

	{"lease/release", func(t *testing.T, e *env) {
		l := e.lease("job", "a", time.Minute)
		before := e.db.Now()
		require.NoError(t, e.db.Release(e.ctx, l))
		e.bracket(l.Expires, before, e.db.Now(), 0, "a released lease's Expires is when it ended")
		err := e.db.Release(e.ctx, l)
		assert.ErrorIs(t, err, state.ErrLeaseLost, "released twice")
		assert.ErrorContains(t, err, `release "job" token 1`)
		err = e.db.Renew(e.ctx, l, time.Second)
		assert.ErrorIs(t, err, state.ErrLeaseLost, "renew after release")
		assert.ErrorContains(t, err, `renew "job" token 1`)

		l2 := e.lease("job", "a", time.Minute)
		assert.Equal(t, int64(2), l2.Token, "the same owner after its release gets a new token")
		assert.False(t, l2.Extended, "a released lease is granted anew, not extended")
		assert.ErrorIs(t, e.db.Renew(e.ctx, l, time.Second), state.ErrLeaseLost, "the old token stays lost")
		assert.ErrorIs(t, e.db.Release(e.ctx, l), state.ErrLeaseLost)
		require.NoError(t, e.db.Renew(e.ctx, l2, time.Minute))
		require.NoError(t, e.db.Release(e.ctx, l2))
		_, err = e.db.Sweep(e.ctx)
		require.NoError(t, err)
		l3 := e.lease("job", "b", time.Minute)
		assert.Equal(t, int64(3), l3.Token, "a sweep does not reset tokens")
	}},

	{"lease/newer-token-loses-older", func(t *testing.T, e *env) {
		l := e.lease("job", "a", time.Minute)
		require.NoError(t, e.db.Release(e.ctx, l))
		newer := e.lease("job", "b", time.Minute)
		stale := *newer
		stale.Token = newer.Token - 1
		assert.ErrorIs(t, e.db.Renew(e.ctx, &stale, time.Second), state.ErrLeaseLost, "an older token of the holder")
		assert.ErrorIs(t, e.db.Release(e.ctx, &stale), state.ErrLeaseLost)
		require.NoError(t, e.db.Renew(e.ctx, newer, time.Minute))
	}},

	{"lease/expiry-frees-with-next-token", func(t *testing.T, e *env) {
		start := time.Now() // before the grant: its deadline is at least short after this
		l := e.lease("job", "a", short)
		assert.Equal(t, int64(1), l.Token)
		// Another owner polls until the lease is free: meanwhile it is held.
		var next *state.Lease
		for next == nil {
			got, err := e.db.Lease(e.ctx, "job", "b", time.Minute)
			if err == nil {
				next = got
				break
			}
			require.ErrorIs(t, err, state.ErrLeaseHeld)
			var held *state.LeaseHeldError
			require.ErrorAs(t, err, &held)
			assert.Equal(t, "a", held.Owner)
			if time.Since(start) > waitCap {
				t.Fatalf("a %v lease still held after %v", short, waitCap)
			}
			time.Sleep(pollEvery)
		}
		assert.GreaterOrEqual(t, time.Since(start), short-early, "the lease was held until its deadline")
		assert.Equal(t, int64(2), next.Token, "an expired lease is free, with the next token")
		assert.Equal(t, "b", next.Owner)
		assert.ErrorIs(t, e.db.Renew(e.ctx, l, time.Minute), state.ErrLeaseLost, "the expired holder cannot renew")
		assert.ErrorIs(t, e.db.Release(e.ctx, l), state.ErrLeaseLost, "nor release")
	}},

	{"lease/same-owner-after-expiry", func(t *testing.T, e *env) {
		l := e.lease("job", "a", short)
		e.waitPast(l.Expires)
		assert.ErrorIs(t, e.db.Renew(e.ctx, l, time.Minute), state.ErrLeaseLost, "expired at its deadline")
		after := e.lease("job", "a", time.Minute)
		assert.Equal(t, l.Token+1, after.Token, "once expired, the same owner gets a new grant")
		assert.False(t, after.Extended, "an expired lease is granted anew, not extended")
		assert.ErrorIs(t, e.db.Release(e.ctx, l), state.ErrLeaseLost, "the old grant stays lost")
		require.NoError(t, e.db.Release(e.ctx, after))
	}},

	{"lease/free-once-the-store-time-passes-the-deadline", func(t *testing.T, e *env) {
		l := e.lease("job", "a", short)
		e.waitPast(l.Expires)
		next := e.lease("job", "b", time.Minute)
		assert.Equal(t, l.Token+1, next.Token, "free at once past its deadline, with the next token")
		ls := e.leases(true)
		require.Len(t, ls, 1)
		assert.Equal(t, "b", ls[0].Owner)
		assert.Equal(t, state.LeaseHeld, ls[0].Status)
	}},

	{"lease/contended-grant", func(t *testing.T, e *env) {
		// Goroutines on two handles race for one name: exactly one wins,
		// every other sees the winner in its LeaseHeldError.
		handles := []*state.DB{e.db, e.other()}
		const perHandle = 8
		type result struct {
			owner string
			l     *state.Lease
			err   error
		}
		results := make(chan result, len(handles)*perHandle)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for h, db := range handles {
			for g := range perHandle {
				wg.Add(1)
				go func() {
					defer wg.Done()
					owner := fmt.Sprintf("h%d-g%d", h, g)
					<-start
					l, err := db.Lease(e.ctx, "job", owner, time.Hour)
					results <- result{owner, l, err}
				}()
			}
		}
		close(start)
		wg.Wait()
		close(results)
		var winners []*state.Lease
		var heldBy []string
		for r := range results {
			if r.err == nil {
				winners = append(winners, r.l)
				continue
			}
			var held *state.LeaseHeldError
			if assert.ErrorAs(t, r.err, &held, r.owner) {
				heldBy = append(heldBy, held.Owner)
			}
		}
		require.Len(t, winners, 1, "exactly one grant")
		assert.Equal(t, int64(1), winners[0].Token)
		assert.Len(t, heldBy, len(handles)*perHandle-1)
		for _, o := range heldBy {
			assert.Equal(t, winners[0].Owner, o, "every loser names the winner")
		}
	}},

	{"lease/held-error-text", func(t *testing.T, e *env) {
		e.lease("job", "a", time.Hour)
		_, err := e.db.Lease(e.ctx, "job", "b", time.Minute)
		require.Error(t, err)
		assert.ErrorContains(t, err, `lease "job" held by "a" for`)
		assert.True(t, errors.Is(err, state.ErrLeaseHeld))
	}},
}
