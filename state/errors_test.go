package state_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestErrorsNameFileVerbAndKey: every error a verb returns starts with the
// file, then names the verb and the key or lease it concerns, and wraps
// its sentinel.
func TestErrorsNameFileVerbAndKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		ctx := f.ctx
		require.NoError(t, f.db.Set(ctx, "text", "x"))
		l, err := f.db.Lease(ctx, "job", "a", time.Second)
		require.NoError(t, err)
		f.clock.Advance(2 * time.Second)
		_, err = f.db.Lease(ctx, "job", "b", time.Minute)
		require.NoError(t, err)

		type call struct {
			name, want string // want: what follows "FILE: "
			sentinel   error
			err        error
		}
		_, getErr := f.db.Get(ctx, "missing")
		_, ttlErr := f.db.TTL(ctx, "missing")
		_, incrErr := f.db.Incr(ctx, "text")
		_, decrErr := f.db.DecrBy(ctx, "text", 2)
		_, casErr := f.db.CAS(ctx, "k", struct{}{}, "v")
		_, expireErr := f.db.Expire(ctx, strings.Repeat("k", state.MaxKeyBytes+1), time.Second)
		_, delErr := f.db.Del(ctx, "a", "b", "c", "d", "")
		_, leaseErr := f.db.Lease(ctx, "job", "c", time.Minute)
		var txIncrErr error
		updateErr := f.db.Update(ctx, func(tx *state.Tx) error {
			_, txIncrErr = tx.Incr("text")
			return txIncrErr
		})
		calls := []call{
			{"get", `get "missing": `, state.ErrNotFound, getErr},
			{"ttl", `ttl "missing": `, state.ErrNotFound, ttlErr},
			{"incr", `incr "text": `, state.ErrNotInteger, incrErr},
			{"decrby", `decr "text": `, state.ErrNotInteger, decrErr},
			{"cas", `cas "k": `, state.ErrInvalidValue, casErr},
			{"expire", `expire "kkkk`, state.ErrInvalidKey, expireErr},
			{"del", `del "a", "b", "c" and 2 more: `, state.ErrInvalidKey, delErr},
			{"set", `set "k": `, state.ErrInvalidTTL, f.db.Set(ctx, "k", 1, state.TTL(-time.Second))},
			{"lease", `lease "job": `, state.ErrLeaseHeld, leaseErr},
			{"renew", `renew "job" token 1: `, state.ErrLeaseLost, f.db.Renew(ctx, l, time.Second)},
			{"release", `release "job" token 1: `, state.ErrLeaseLost, f.db.Release(ctx, l)},
			{"tx incr", `incr "text": `, state.ErrNotInteger, txIncrErr},
			{"update", `incr "text": `, state.ErrNotInteger, updateErr},
			{"incrbuffered", `incrbuffered "": `, state.ErrInvalidKey, f.db.IncrBuffered("", 1)},
			{"update nil", `update: `, state.ErrInvalidArgument, f.db.Update(ctx, nil)},
		}
		require.NoError(t, f.db.Close())
		_, closedErr := f.db.Get(ctx, "k")
		calls = append(calls,
			call{"after close", `get "k": `, state.ErrClosed, closedErr},
			call{"flush after close", `flush: `, state.ErrClosed, f.db.Flush(ctx)})
		for _, c := range calls {
			require.Error(t, c.err, c.name)
			assert.ErrorIs(t, c.err, c.sentinel, c.name)
			assert.True(t, strings.HasPrefix(c.err.Error(), f.path+": "+c.want), "%s: %q", c.name, c.err)
		}
		assert.Equal(t, txIncrErr, updateErr, "Update returns the callback's error as it is")
	})
}

// TestOpenNamesTheCause: Open's errors from the operating system wrap
// ErrCannotOpen and the OS error, and name the file.
func TestOpenNamesTheCause(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "x.state")
	_, err := state.Open(path)
	assert.ErrorIs(t, err, state.ErrCannotOpen)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.True(t, strings.HasPrefix(err.Error(), "open "+path+": "), "%v", err)

	missing := filepath.Join(t.TempDir(), "missing.state")
	_, err = state.Open(missing, state.WithReadOnly())
	assert.ErrorIs(t, err, state.ErrCannotOpen)
	assert.ErrorIs(t, err, fs.ErrNotExist)

	// A directory where the file should be: SQLite cannot open it. Read
	// only too: the directory opens for reading, and SQLite's first read
	// of it failed, which was ErrIO (a handle that ended, a write whose
	// outcome is unknown) before.
	dir := filepath.Join(t.TempDir(), "dir.state")
	require.NoError(t, os.Mkdir(dir, 0o700))
	for name, opts := range map[string][]state.Option{"writable": nil, "read-only": {state.WithReadOnly()}} {
		_, err = state.Open(dir, opts...)
		assert.ErrorIs(t, err, state.ErrCannotOpen, name)
		assert.ErrorIs(t, err, syscall.EISDIR, name)
		assert.False(t, errors.Is(err, state.ErrCorrupt) || errors.Is(err, state.ErrIO), "%s: a directory is not a damaged file: %v", name, err)
		assert.True(t, strings.HasPrefix(err.Error(), "open "+dir+": "), "%s: %v", name, err)
	}
}
