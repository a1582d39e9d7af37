package redisstate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGetWhileServerLoads: a server restarted from its AOF answers LOADING
// until it has read it (here slowed to 100 µs a key; it answers clients
// between every 1,024 keys it reads, and they wait in between). The load
// lasts seconds: go-redis, after failed dials while the server was down,
// fails fast for up to a second before it dials again. Get, a MULTI/EXEC,
// sees its transaction discarded (EXECABORT) then; it must say why, as
// every scripted verb does: ErrUnavailable naming LOADING, nothing applied.
// Once loaded, every key is back.
func TestGetWhileServerLoads(t *testing.T) {
	const keys = 15000
	srv := redistest.Start(t, redistest.WithArgs("--key-load-delay", "100"))
	db := openURL(t, srv.URL("t:"))
	ctx := ctxT(t)
	require.NoError(t, db.Update(ctx, func(tx *state.Tx) error {
		for i := range keys {
			if err := tx.Set(fmt.Sprint("k", i), i); err != nil {
				return err
			}
		}
		return nil
	}))
	srv.Kill()
	relaunched := make(chan error, 1)
	go func() { relaunched <- srv.Relaunch() }()
	loading := 0
	for done := false; !done; {
		select {
		case err := <-relaunched:
			require.NoError(t, err)
			done = true
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := db.Get(cctx, "k1")
		cancel()
		switch {
		case err == nil, done:
		case strings.Contains(err.Error(), "LOADING"):
			require.ErrorIs(t, err, state.ErrUnavailable)
			assert.NotContains(t, err.Error(), "EXECABORT", "the cause, not the discarded transaction")
			loading++
		case errors.Is(err, context.DeadlineExceeded):
			// between two of the server's looks at its clients
		default:
			require.ErrorIs(t, err, state.ErrUnavailable, "while the server restarts")
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Positive(t, loading, "Get ran while the server loaded its %d keys", keys)
	// Every key is back, read in one Scan: 15,000 Gets one after another
	// took most of the test's minute on a loaded machine, and ran out of it.
	back := map[string]int64{}
	require.NoError(t, db.Scan(ctx, "k", false, func(k state.KeyInfo) error {
		back[k.Key], _ = k.Value.Int()
		return nil
	}))
	require.Len(t, back, keys)
	for i := range keys {
		n, ok := back[fmt.Sprint("k", i)]
		require.True(t, ok, "k%d is back", i)
		require.EqualValues(t, i, n, "k%d", i)
	}
}

// TestGetNamesAQueuedCommandsError: a server without GET (renamed away)
// refuses Get's transaction; the error names the command it lacks, not
// just the discarded transaction.
func TestGetNamesAQueuedCommandsError(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--rename-command", "GET", ""))
	db := openURL(t, srv.URL("t:"))
	_, err := db.Get(ctxT(t), "k")
	require.Error(t, err)
	require.False(t, errors.Is(err, state.ErrNotFound))
	assert.Contains(t, strings.ToLower(err.Error()), "unknown command")
	assert.Contains(t, err.Error(), srv.Addr())
}
