package redisstate_test

import (
	"errors"
	"fmt"
	"strings"

	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errCallback = errors.New("the callback's own answer")

// TestUpdateWatchCheckConnectionLost: an attempt whose callback read a key,
// wrote another and returned an error checks its watches with an empty
// MULTI/EXEC before Update returns that error (txcheck.go). When the
// connection is cut between the callback and the check (CLIENT KILL of the
// store's connections), Update returns ErrUnavailable saying the callback's
// error is not returned, not the callback's error, which may have come from
// reads no single moment held; the write was never sent; the callback ran
// once; and the store works on afterwards. The same for a callback that
// returns nil having written nothing, whose commit is that check too.
func TestUpdateWatchCheckConnectionLost(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "a", 1))

	runs := 0
	err := db.Update(ctx, func(tx *state.Tx) error {
		runs++
		if _, err := tx.Get("a"); err != nil {
			return err
		}
		if err := tx.Set("b", 2); err != nil {
			return err
		}
		redisCmd(t, srv, "CLIENT", "KILL", "TYPE", "normal") // not this admin connection (SKIPME)
		return errCallback
	})
	require.Error(t, err)
	t.Logf("check failed after an error: %v", err)
	assert.NotErrorIs(t, err, errCallback, "the callback's error is not returned from an unchecked read")
	assert.ErrorIs(t, err, state.ErrUnavailable, "an empty EXEC applies nothing")
	assert.Contains(t, err.Error(), "is not returned")
	assert.Equal(t, 1, runs, "a failed check is not a conflict: no second run")

	runs = 0
	err = db.Update(ctx, func(tx *state.Tx) error {
		runs++
		if _, err := tx.Get("a"); err != nil {
			return err
		}
		redisCmd(t, srv, "CLIENT", "KILL", "TYPE", "normal")
		return nil
	})
	t.Logf("check failed after nil: %v", err)
	require.ErrorIs(t, err, state.ErrUnavailable)
	assert.Equal(t, 1, runs)

	_, err = db.Get(ctx, "b")
	require.ErrorIs(t, err, state.ErrNotFound, "nothing of the failed attempt was applied")
	v, err := db.Get(ctx, "a")
	require.NoError(t, err)
	n, _ := v.Int()
	assert.EqualValues(t, 1, n)
}

// TestUpdateWatchCheckRefused: the server refuses the check's EXEC (here it
// is busy running another client's script past busy-reply-threshold, and
// discards the transaction: EXECABORT ... because of: BUSY). Update says
// why, as a commit does: ErrBusy naming BUSY, not a bare EXECABORT, and not
// the callback's error; nothing was applied, and once the script is killed
// the store works on.
func TestUpdateWatchCheckRefused(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "a", 1))
	redisCmd(t, srv, "CONFIG", "SET", "busy-reply-threshold", "10")
	for _, ret := range []error{errCallback, nil} {
		script := make(chan error, 1)
		runs := 0
		err := db.Update(ctx, func(tx *state.Tx) error {
			runs++
			if _, err := tx.Get("a"); err != nil {
				return err
			}
			if ret != nil {
				if err := tx.Set("b", 2); err != nil {
					return err
				}
			}
			go func() {
				_, err := srv.Command("EVAL", "while true do end", "0")
				script <- err
			}()
			eventually(t, "the server busy with the script", func() bool {
				_, err := srv.Command("PING")
				return err != nil && strings.HasPrefix(err.Error(), "BUSY")
			})
			return ret
		})
		redisCmd(t, srv, "SCRIPT", "KILL")
		require.Error(t, <-script)
		require.Error(t, err, "callback returned %v", ret)
		t.Logf("callback returned %v: %v", ret, err)
		assert.NotErrorIs(t, err, errCallback)
		assert.ErrorIs(t, err, state.ErrBusy, "the cause of the discarded check, classified")
		assert.Contains(t, err.Error(), "BUSY")
		assert.Equal(t, 1, runs)
	}
	_, err := db.Get(ctx, "b")
	require.ErrorIs(t, err, state.ErrNotFound, "nothing of the refused attempt was applied")
	n, err := db.Incr(ctx, "a")
	require.NoError(t, err, "the store works on")
	assert.EqualValues(t, 2, n)
}

// TestUpdateCallbackErrorFromChangedReadRunsAgain: a callback that returns
// an error after a key it read was changed by another writer (here between
// its read and its return, every first run) answered from a state that is
// gone: the check finds the conflict and the callback runs again, and
// Update returns the second run's error, drawn from the key's new value.
// Deterministic where TestUpdateCallbackSeesOneState races a writer.
func TestUpdateCallbackErrorFromChangedReadRunsAgain(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "a", 1))
	var seen []int64
	err := db.Update(ctx, func(tx *state.Tx) error {
		v, err := tx.Get("a")
		if err != nil {
			return err
		}
		n, _ := v.Int()
		seen = append(seen, n)
		if len(seen) == 1 {
			redisCmd(t, srv, "SET", "t:k:a", "i:5") // another writer
		}
		return fmt.Errorf("%w: a is %d", errCallback, n)
	})
	require.ErrorIs(t, err, errCallback)
	assert.Equal(t, []int64{1, 5}, seen, "run again after the conflict")
	assert.Contains(t, err.Error(), "a is 5", "the answer of the run whose read held")
}
