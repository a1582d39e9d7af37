package state_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpdateCallbackErrorFromElsewhereLeavesTheHandle returns from the
// callback an error that wraps one of the engine's sentinels but came from
// elsewhere (another store the callback read, which failed): Update returns
// it as it is, and this handle, whose own statements all went well, goes on.
// Before, Update took it for its own: an ErrIO or ErrCorrupt from another
// store ended this handle.
func TestUpdateCallbackErrorFromElsewhereLeavesTheHandle(t *testing.T) {
	for _, sentinel := range []error{state.ErrIO, state.ErrCorrupt, state.ErrDiskFull, state.ErrBusy} {
		t.Run(sentinel.Error(), func(t *testing.T) {
			f := newFixture(t, backends[0])
			elsewhere := fmt.Errorf("the other store: %w", sentinel)
			err := f.db.Update(f.ctx, func(tx *state.Tx) error {
				if err := tx.Set("a", 1); err != nil {
					return err
				}
				return elsewhere
			})
			assert.Equal(t, elsewhere, err, "the callback's error as it is")
			assert.Equal(t, "<absent>", f.get("a"), "rolled back")
			require.NoError(t, f.db.Set(f.ctx, "b", 2), "the handle goes on")
			assert.Equal(t, "int:2", f.get("b"))
		})
	}
}

// TestUpdateVerbIOErrorEndsTheHandleWhateverTheCallbackReturns fails a
// read inside a transaction whose callback then returns an error of its
// own: Update returns the callback's error, and the handle has ended, as
// after any ErrIO (and as when the callback returns the verb's error or
// nil). Before, the handle went on as if the read had not failed.
func TestUpdateVerbIOErrorEndsTheHandleWhateverTheCallbackReturns(t *testing.T) {
	fm := newFltMachine(t)
	db := fm.open(1)
	for i := range 200 {
		require.NoError(t, db.Set(fm.ctx, fmt.Sprintf("k%03d", i), strings.Repeat("v", 500)))
	}
	require.NoError(t, db.Close())
	db = fm.open(2) // a cold cache: the Get below reads the file
	fm.m.FailAt(faults.OpRead, 1)
	mine := errors.New("my own reason")
	var verbErr error
	err := db.Update(fm.ctx, func(tx *state.Tx) error {
		_, verbErr = tx.Get("k150")
		return mine
	})
	require.ErrorIs(t, verbErr, state.ErrIO, "the injected fault met the Get")
	assert.Equal(t, mine, err, "Update returns the callback's error")
	err = db.Set(fm.ctx, "after", 1)
	require.ErrorIs(t, err, state.ErrIO, "the handle has ended")
	assert.ErrorContains(t, err, "the handle failed earlier")
	_, err = db.Get(fm.ctx, "k000")
	assert.ErrorIs(t, err, state.ErrIO, "every later call says so")

	db2 := fm.open(3)
	v, err := db2.Get(fm.ctx, "k150")
	require.NoError(t, err, "the file is sound")
	assert.Equal(t, 500, len(v.String()))
	_, err = db2.Get(fm.ctx, "after")
	assert.ErrorIs(t, err, state.ErrNotFound)
}

// TestUpdateVerbIOErrorEndsTheHandleWhenTheCallbackDoesNotReturn fails a
// read inside a transaction whose callback then panics, or calls
// runtime.Goexit (as t.FailNow does): the handle has ended all the same.
// Before, only a callback that returned let Update see the I/O error.
func TestUpdateVerbIOErrorEndsTheHandleWhenTheCallbackDoesNotReturn(t *testing.T) {
	for _, leave := range []string{"panic", "goexit"} {
		t.Run(leave, func(t *testing.T) {
			fm := newFltMachine(t)
			db := fm.open(1)
			for i := range 200 {
				require.NoError(t, db.Set(fm.ctx, fmt.Sprintf("k%03d", i), strings.Repeat("v", 500)))
			}
			require.NoError(t, db.Close())
			db = fm.open(2) // a cold cache: the Get below reads the file
			fm.m.FailAt(faults.OpRead, 1)
			var verbErr error
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { _ = recover() }()
				_ = db.Update(fm.ctx, func(tx *state.Tx) error {
					_, verbErr = tx.Get("k150")
					if leave == "panic" {
						panic("gave up")
					}
					runtime.Goexit()
					return nil
				})
			}()
			wg.Wait()
			require.ErrorIs(t, verbErr, state.ErrIO, "the injected fault met the Get")
			err := db.Set(fm.ctx, "after", 1)
			require.ErrorIs(t, err, state.ErrIO, "the handle has ended")
			assert.ErrorContains(t, err, "the handle failed earlier")
		})
	}
}

// TestUpdateAbortWhoseMarkSyncFailsIsAnIOError: with SyncFull, a callback
// that reads and returns its own error, at a time the high-water mark did
// not cover yet, leaves the mark's write to sync after the rollback; that
// sync fails. Update must say ErrIO (wrapping the callback's error too):
// the time the callback's reads used may not survive, and the handle has
// ended. It returned the callback's error alone, a successful abort,
// though on a disk that drops a failed sync's pages the next Open started
// before that time (statesim -seed 9640060 -procs 1 -syncfull
// -dropfailedsyncs -syncerror 0.02: the clock check).
func TestUpdateAbortWhoseMarkSyncFailsIsAnIOError(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	clock := newClock()
	db, err := state.Open("/sim/abort.state", state.WithFS(m.Process(1)), state.WithClock(clock),
		state.WithoutBackground(), state.WithSync(state.SyncFull))
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set(ctx, "a", 1))
	clock.Advance(state.HighWaterLead + time.Second) // the next verb writes the mark
	m.FailAt(faults.OpSync, 1)
	mine := errors.New("changed my mind")
	var read string
	err = db.Update(ctx, func(tx *state.Tx) error {
		v, err := tx.Get("a")
		if err != nil {
			return err
		}
		read = v.String()
		return mine
	})
	require.Equal(t, "1", read, "the callback ran")
	require.ErrorIs(t, err, state.ErrIO, "the mark's sync failed: the call failed")
	require.ErrorIs(t, err, mine, "the callback's error is kept")
	assert.Contains(t, err.Error(), "changed my mind")
	_, err = db.Get(ctx, "a")
	require.ErrorIs(t, err, state.ErrIO, "the handle has ended")
}
