package redisstate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeaseLifecycle(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	l, err := db.Lease(ctx, "job", "a", time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 1, l.Token)
	assert.Equal(t, "a", l.Owner)
	assert.WithinDuration(t, db.Now().Add(time.Minute), l.Expires, 5*time.Second)

	again, err := db.Lease(ctx, "job", "a", 2*time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 1, again.Token, "same owner while live: same token")
	assert.True(t, again.Expires.After(l.Expires))

	_, err = db.Lease(ctx, "job", "b", time.Minute)
	var held *state.LeaseHeldError
	require.ErrorAs(t, err, &held)
	assert.ErrorIs(t, err, state.ErrLeaseHeld)
	assert.Equal(t, "a", held.Owner)
	assert.Equal(t, "job", held.Name)
	assert.Greater(t, held.Left, time.Minute)
	assert.Equal(t, again.Expires.UnixMilli(), held.Expires.UnixMilli())

	before := again.Expires
	require.NoError(t, db.Renew(ctx, again, 3*time.Minute))
	assert.True(t, again.Expires.After(before))
	assert.EqualValues(t, 1, again.Token)
	assert.ErrorIs(t, db.Renew(ctx, &state.Lease{Name: "job", Owner: "a", Token: 7}, time.Minute), state.ErrLeaseLost)
	assert.ErrorIs(t, db.Renew(ctx, &state.Lease{Name: "job", Owner: "b", Token: 1}, time.Minute), state.ErrLeaseLost)

	require.NoError(t, db.Release(ctx, again))
	assert.ErrorIs(t, db.Release(ctx, again), state.ErrLeaseLost)
	assert.ErrorIs(t, db.Renew(ctx, again, time.Minute), state.ErrLeaseLost)
	assert.Equal(t, ":1", redisCmd(t, srv, "EXISTS", "t:lease:job"), "a released lease keeps its hash")
	assert.Equal(t, ":-1", redisCmd(t, srv, "PTTL", "t:lease:job"), "a lease hash has no Redis TTL")

	next, err := db.Lease(ctx, "job", "b", 100*time.Millisecond)
	require.NoError(t, err)
	assert.EqualValues(t, 2, next.Token, "token+1 after release")
	eventually(t, "lease expires", func() bool {
		status := state.LeaseStatus(0)
		require.NoError(t, db.Leases(ctx, true, func(li state.LeaseInfo) error { status = li.Status; return nil }))
		return status == state.LeaseExpired
	})
	assert.ErrorIs(t, db.Renew(ctx, next, time.Minute), state.ErrLeaseLost)
	third, err := db.Lease(ctx, "job", "b", time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 3, third.Token, "token+1 after expiry, even for the same owner")

	var infos []state.LeaseInfo
	require.NoError(t, db.Leases(ctx, true, func(li state.LeaseInfo) error { infos = append(infos, li); return nil }))
	require.Len(t, infos, 1)
	assert.Equal(t, state.LeaseHeld, infos[0].Status)
	assert.EqualValues(t, 3, infos[0].Token)
	require.NoError(t, db.Release(ctx, third))
	infos = nil
	require.NoError(t, db.Leases(ctx, false, func(li state.LeaseInfo) error { infos = append(infos, li); return nil }))
	assert.Empty(t, infos)
	require.NoError(t, db.Leases(ctx, true, func(li state.LeaseInfo) error { infos = append(infos, li); return nil }))
	require.Len(t, infos, 1)
	assert.Equal(t, state.LeaseReleased, infos[0].Status)
	assert.True(t, infos[0].Expires.IsZero())
}

func TestLeaseTokensSurviveRestart(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	l, err := db.Lease(ctx, "x", "a", 50*time.Millisecond)
	require.NoError(t, err)
	require.EqualValues(t, 1, l.Token)
	srv.Kill()
	srv.Restart()
	eventually(t, "lease after restart", func() bool {
		l, err = db.Lease(ctx, "x", "b", time.Minute)
		return err == nil
	})
	assert.EqualValues(t, 2, l.Token, "the append-only file kept the grant")
}

func TestLeaseNotDurable(t *testing.T) {
	srv := redistest.Start(t, redistest.WithoutPersistence())
	ctx := ctxT(t)
	db := openURL(t, srv.URL("t:"))
	_, err := db.Lease(ctx, "x", "a", time.Minute)
	require.ErrorIs(t, err, state.ErrNotDurable)
	assert.Contains(t, err.Error(), "appendonly no")
	assert.Contains(t, err.Error(), "allow_unsafe_leases=true")
	err = db.Update(ctx, func(tx *state.Tx) error {
		_, err := tx.Lease("x", "a", time.Minute)
		return err
	})
	require.ErrorIs(t, err, state.ErrNotDurable)
	// Other verbs work.
	require.NoError(t, db.Set(ctx, "k", 1))

	unsafe := openURL(t, srv.URL("t:")+"&allow_unsafe_leases=true")
	l, err := unsafe.Lease(ctx, "x", "a", time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 1, l.Token)

	// everysec is not enough either.
	redisCmd(t, srv, "CONFIG", "SET", "appendonly", "yes")
	_, err = db.Lease(ctx, "y", "a", time.Minute)
	require.ErrorIs(t, err, state.ErrNotDurable)
	assert.Contains(t, err.Error(), "appendfsync everysec")
	redisCmd(t, srv, "CONFIG", "SET", "appendfsync", "always")
	_, err = db.Lease(ctx, "y", "a", time.Minute)
	require.NoError(t, err, "checked again after a refusal")
}

func TestLeaseDurabilityUnverifiable(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--rename-command", "CONFIG", ""))
	ctx := ctxT(t)
	db := openURL(t, srv.URL("t:"))
	_, err := db.Lease(ctx, "x", "a", time.Minute)
	require.ErrorIs(t, err, state.ErrNotDurable)
	assert.Contains(t, err.Error(), "cannot be verified")
	assert.Contains(t, err.Error(), "allow_unsafe_leases=true")

	unsafe := openURL(t, srv.URL("t:")+"&allow_unsafe_leases=true")
	l, err := unsafe.Lease(ctx, "x", "a", time.Minute)
	require.NoError(t, err, "the URL opted out: settings it cannot read are not asked for")
	assert.EqualValues(t, 1, l.Token)
}

func TestLeaseWaitsForReplicas(t *testing.T) {
	master := redistest.Start(t)
	ctx := ctxT(t)
	alone := openURL(t, master.URL("t:")+"&wait_replicas=1")
	start := time.Now()
	_, err := alone.Lease(ctx, "x", "a", time.Minute)
	require.ErrorIs(t, err, state.ErrOutcomeUnknown, "no replica acknowledged the grant")
	assert.Contains(t, err.Error(), "0 of the 1 replicas")
	assert.Less(t, time.Since(start), 10*time.Second)
	err = alone.Update(ctx, func(tx *state.Tx) error { _, err := tx.Lease("y", "a", time.Minute); return err })
	require.ErrorIs(t, err, state.ErrOutcomeUnknown)

	host, port, _ := strings.Cut(master.Addr(), ":")
	redistest.Start(t, redistest.WithArgs("--replicaof", host, port))
	var l *state.Lease
	eventually(t, "a grant acknowledged by the replica", func() bool {
		l, err = alone.Lease(ctx, "x", "a", time.Minute)
		return err == nil
	})
	assert.EqualValues(t, 1, l.Token, "the same owner's retry got the same token")
	require.NoError(t, alone.Update(ctx, func(tx *state.Tx) error { _, err := tx.Lease("y", "a", time.Minute); return err }))
}
