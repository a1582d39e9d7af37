package redisstate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLeaseRechecksDurabilityAfterRestart: Lease checks the server's
// durability once and remembers it passed. A server restarted with
// appendonly no (a CONFIG SET never written to its config file, say) loads
// no append-only file, so every lease hash is gone and a grant would hand
// token 1 out again. The store reaches the restarted server over new
// connections only, and checks again then: Lease and Update fail with
// ErrNotDurable, each the first call after the restart, when the check
// that passed before it is still remembered. A Lease's first call ran its
// grant over the new connection before the check, so the grant stands on
// the server: that answer also wraps ErrOutcomeUnknown (it said "not
// durable" alone, as if nothing had been written), and the next call is
// refused before it is sent. Restarted durable (the old append-only file
// loaded again), the next grant is token 2.
func TestLeaseRechecksDurabilityAfterRestart(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	l, err := db.Lease(ctx, "x", "a", time.Millisecond)
	require.NoError(t, err)
	require.EqualValues(t, 1, l.Token)

	for _, c := range []struct {
		name  string
		grant func() (*state.Lease, error)
	}{
		{"lease", func() (*state.Lease, error) { return db.Lease(ctx, "x", "b", time.Minute) }},
		{"update", func() (*state.Lease, error) {
			var l *state.Lease
			err := db.Update(ctx, func(tx *state.Tx) error {
				var err error
				l, err = tx.Lease("x", "b", time.Minute)
				return err
			})
			return l, err
		}},
	} {
		name, grant := c.name, c.grant
		_, err := db.Lease(ctx, "durable-"+name, "me", time.Minute)
		require.NoError(t, err, "%s: the check passes, and is remembered", name)
		srv.RestartWith(redistest.WithoutPersistence())
		l, err = afterRestart(t, ctx, grant)
		require.ErrorIs(t, err, state.ErrNotDurable, "%s: granted %+v on a server that lost the first grant", name, l)
		assert.Contains(t, err.Error(), "appendonly no", name)
		if name == "lease" {
			assert.ErrorIs(t, err, state.ErrOutcomeUnknown, "the grant ran before the check: its outcome is unknown")
			_, err = grant()
			require.ErrorIs(t, err, state.ErrNotDurable, "refused before it is sent")
			assert.NotErrorIs(t, err, state.ErrOutcomeUnknown, "refused before it is sent")
		}

		srv.RestartWith()
		_, err = afterRestart(t, ctx, func() (*state.Lease, error) { return db.Lease(ctx, "durable-"+name, "me", time.Minute) })
		require.NoError(t, err, "%s: restarted durable", name)
	}
	l, err = db.Lease(ctx, "x", "b", time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 2, l.Token, "the append-only file kept the first grant")
}

// afterRestart calls grant until it is not refused for the restart itself
// (a pooled connection to the killed server, or a dial the server did not
// answer yet).
func afterRestart(t *testing.T, ctx context.Context, grant func() (*state.Lease, error)) (*state.Lease, error) {
	t.Helper()
	var l *state.Lease
	var err error
	eventually(t, "an answer from the restarted server", func() bool {
		l, err = grant()
		return ctx.Err() != nil || !errors.Is(err, state.ErrUnavailable) &&
			(!errors.Is(err, state.ErrOutcomeUnknown) || errors.Is(err, state.ErrNotDurable))
	})
	return l, err
}

// TestLeaseOnAServerThatRefusesThePasswordIsUnavailable: a server whose
// password was changed under the store refuses every command on a new
// connection (NOAUTH). The durability check before a grant, made again on
// that connection, says so as every verb does, ErrUnavailable, where it
// said ErrNotDurable ("cannot be verified ... add allow_unsafe_leases=true"),
// pointing the user the wrong way.
func TestLeaseOnAServerThatRefusesThePasswordIsUnavailable(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	_, err := db.Lease(ctx, "x", "a", time.Minute)
	require.NoError(t, err, "the check passes, and is remembered")
	redisCmd(t, srv, "CONFIG", "SET", "requirepass", "changed")
	_, err = redistest.Command(srv.Addr(), "changed", "CLIENT", "KILL", "TYPE", "normal")
	require.NoError(t, err)

	for _, grant := range []func() error{
		func() error { _, err := db.Lease(ctx, "y", "a", time.Minute); return err },
		func() error { _, err := db.Lease(ctx, "y", "a", time.Minute); return err }, // the check not remembered
	} {
		err := grant()
		require.ErrorIs(t, err, state.ErrUnavailable)
		assert.NotErrorIs(t, err, state.ErrNotDurable)
		assert.NotContains(t, err.Error(), "allow_unsafe_leases")
	}
	_, err = redistest.Command(srv.Addr(), "changed", "CONFIG", "SET", "requirepass", "")
	require.NoError(t, err)
}
