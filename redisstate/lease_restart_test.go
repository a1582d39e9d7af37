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
// connections only, and checks again then: Lease and Update refuse with
// ErrNotDurable, each the first call after the restart, when the check
// that passed before it is still remembered. Restarted durable (the old
// append-only file loaded again), the next grant is token 2.
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
		return ctx.Err() != nil || !errors.Is(err, state.ErrUnavailable) && !errors.Is(err, state.ErrOutcomeUnknown)
	})
	return l, err
}
