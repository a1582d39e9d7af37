package state_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVerbsWithNothingToWriteStillCheckTheHandle calls the verbs whose
// arguments leave them nothing to write (Del of no keys, DecrBy of the one
// delta whose negation overflows) on a closed handle, with a done context
// and with a bad key: each says so, as every other verb does, rather than
// answer as if it had run.
func TestVerbsWithNothingToWriteStillCheckTheHandle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		done, cancel := context.WithCancel(f.ctx)
		cancel()
		_, err := f.db.Del(done)
		assert.ErrorIs(t, err, context.Canceled, "del of no keys, done context")
		_, err = f.db.DecrBy(done, "k", math.MinInt64)
		assert.ErrorIs(t, err, context.Canceled, "decrby min, done context")
		_, err = f.db.DecrBy(f.ctx, "", math.MinInt64)
		assert.ErrorIs(t, err, state.ErrInvalidKey, "decrby min, empty key")
		_, err = f.db.DecrBy(f.ctx, "k", math.MinInt64, state.TTL(-time.Second))
		assert.ErrorIs(t, err, state.ErrInvalidTTL, "decrby min, bad ttl")
		_, err = f.db.DecrBy(f.ctx, "k", math.MinInt64)
		assert.ErrorIs(t, err, state.ErrOverflow, "decrby min on a live handle")
		n, err := f.db.Del(f.ctx)
		assert.NoError(t, err, "del of no keys on a live handle")
		assert.Zero(t, n)
		require.NoError(t, f.db.Update(f.ctx, func(tx *state.Tx) error {
			_, err := tx.DecrBy("", math.MinInt64)
			assert.ErrorIs(t, err, state.ErrInvalidKey, "tx decrby min, empty key")
			return nil
		}))

		require.NoError(t, f.db.Close())
		_, err = f.db.Del(f.ctx)
		assert.ErrorIs(t, err, state.ErrClosed, "del of no keys after Close")
		_, err = f.db.DecrBy(f.ctx, "k", math.MinInt64)
		assert.ErrorIs(t, err, state.ErrClosed, "decrby min after Close")
	})
}

// TestOpenRefusesMeaninglessOptions opens with option values that mean
// nothing: each is ErrInvalidArgument naming it, and no file is made.
func TestOpenRefusesMeaninglessOptions(t *testing.T) {
	for name, opt := range map[string]state.Option{
		"WithBusyTimeout(-1h0m0s)": state.WithBusyTimeout(-time.Hour),
		"WithSync(42)":             state.WithSync(state.SyncMode(42)),
		"nil Option":               nil,
	} {
		path := t.TempDir() + "/x.state"
		_, err := state.Open(path, opt)
		require.ErrorIs(t, err, state.ErrInvalidArgument, name)
		assert.ErrorContains(t, err, name)
		assert.NoFileExists(t, path, name)
	}
	db, err := state.Open(t.TempDir()+"/x.state", state.WithBusyTimeout(0))
	require.NoError(t, err, "a busy timeout of zero: never wait")
	require.NoError(t, db.Close())
}

// TestAVerbThatReturnsItsContextsErrorDidNothing runs verbs one at a time
// with deadlines of 0-150 µs, so that many end while the verb runs: every
// call that returned its context's error must have left the file as it was,
// and every other call must have taken effect. The driver used to interrupt
// a statement and report the context's end even when the statement (an
// autocommit write, a COMMIT) had finished.
func TestAVerbThatReturnsItsContextsErrorDidNothing(t *testing.T) {
	db, err := state.Open(t.TempDir()+"/x.state", state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	bg := context.Background()
	count := func() int64 {
		v, err := db.Get(bg, "c")
		if err != nil {
			return 0
		}
		n, _ := v.Int()
		return n
	}
	verbs := map[string]func(ctx context.Context, i int) (bool, error){
		"incr": func(ctx context.Context, _ int) (bool, error) {
			before := count()
			_, err := db.Incr(ctx, "c", state.TTL(time.Hour))
			return count() != before, err
		},
		"update": func(ctx context.Context, _ int) (bool, error) {
			before := count()
			err := db.Update(ctx, func(tx *state.Tx) error { _, err := tx.Incr("c"); return err })
			return count() != before, err
		},
		"lease": func(ctx context.Context, i int) (bool, error) {
			name := fmt.Sprintf("l%d", i)
			_, err := db.Lease(ctx, name, "o", time.Hour)
			granted := false
			require.NoError(t, db.Leases(bg, false, func(l state.LeaseInfo) error {
				granted = granted || l.Name == name
				return nil
			}))
			return granted, err
		},
	}
	for name, verb := range verbs {
		cancelled := 0
		for i := range 1500 {
			ctx, cancel := context.WithTimeout(bg, time.Duration(i%150)*time.Microsecond)
			changed, err := verb(ctx, i)
			cancel()
			switch {
			case err == nil:
				require.True(t, changed, "%s %d answered but did nothing", name, i)
			case errors.Is(err, context.DeadlineExceeded):
				cancelled++
				require.False(t, changed, "%s %d returned %v but took effect", name, i, err)
			default:
				require.NoError(t, err, "%s %d", name, i)
			}
		}
		t.Logf("%s: %d of 1500 returned their context's error", name, cancelled)
	}
}
