package redisstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A store whose prefix nests in another's ("" holds "k:") sees the inner
// store's lease hash "k:lease:job" as its key "lease:job": Set refuses to
// replace it (ErrCorrupt, as every other verb already does), so the inner
// store's tokens never start over.
func TestSetLeavesANestedStoresLeaseAlone(t *testing.T) {
	_, srv := openDB(t)
	ctx := ctxT(t)
	outer := openURL(t, srv.URL(""))
	inner := openURL(t, srv.URL("k:"))
	var last int64
	for range 3 {
		l, err := inner.Lease(ctx, "job", "a", time.Minute)
		require.NoError(t, err)
		last = l.Token
		require.NoError(t, inner.Release(ctx, l))
	}
	err := outer.Set(ctx, "lease:job", "hello")
	require.ErrorIs(t, err, state.ErrCorrupt)
	_, err = outer.Del(ctx, "lease:job")
	require.ErrorIs(t, err, state.ErrCorrupt)
	l, err := inner.Lease(ctx, "job", "b", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, last+1, l.Token, "the token goes on")
}

// Sweep returns the context's error once it has ended, as the file
// engine's does.
func TestSweepEndedContext(t *testing.T) {
	db, _ := openDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := db.Sweep(ctx)
	require.ErrorIs(t, err, context.Canceled)
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	_, err = db.Sweep(dctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	n, err := db.Sweep(ctxT(t))
	require.NoError(t, err)
	assert.Zero(t, n)
}
