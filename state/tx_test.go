package state_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUpdateCommitsEveryVerb(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "old", "x"))
		var lease *state.Lease
		err := f.db.Update(f.ctx, func(tx *state.Tx) error {
			if err := tx.Set("a", "1", state.TTL(time.Minute)); err != nil {
				return err
			}
			v, err := tx.Get("a")
			if err != nil {
				return err
			}
			assert.Equal(t, "1", v.String(), "a tx reads its own writes")
			if _, err := tx.Incr("n"); err != nil {
				return err
			}
			if _, err := tx.IncrBy("n", 9); err != nil {
				return err
			}
			if ok, err := tx.CAS("a", "1", "2"); err != nil || !ok {
				return errors.Join(err, errors.New("cas did not swap"))
			}
			if ok, err := tx.Expire("n", time.Hour); err != nil || !ok {
				return errors.Join(err, errors.New("expire did nothing"))
			}
			if left, err := tx.TTL("n"); err != nil || left != time.Hour {
				return errors.Join(err, errors.New("ttl wrong"))
			}
			if n, err := tx.Del("old"); err != nil || n != 1 {
				return errors.Join(err, errors.New("del wrong"))
			}
			lease, err = tx.Lease("job", "me", time.Minute)
			return err
		})
		require.NoError(t, err)
		assert.Equal(t, "bytes:2", f.get("a"))
		assert.Equal(t, "int:10", f.get("n"))
		assert.Equal(t, "<absent>", f.get("old"))
		assert.Equal(t, int64(1), lease.Token)
		_, err = f.db.Lease(f.ctx, "job", "other", time.Second)
		assert.ErrorIs(t, err, state.ErrLeaseHeld, "the grant committed")
		require.NoError(t, f.db.Update(f.ctx, func(tx *state.Tx) error { return tx.Renew(lease, time.Hour) }))
		require.NoError(t, f.db.Update(f.ctx, func(tx *state.Tx) error { return tx.Release(lease) }))
		assert.ErrorIs(t, f.db.Release(f.ctx, lease), state.ErrLeaseLost)
	})
}

func TestUpdateDecrVerbs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "c", 10))
		require.NoError(t, f.db.Set(f.ctx, "s", "text"))
		require.NoError(t, f.db.Set(f.ctx, "min", int64(math.MinInt64)))
		err := f.db.Update(f.ctx, func(tx *state.Tx) error {
			steps := []struct {
				name string
				do   func() (int64, error)
				want int64
			}{
				{"decr", func() (int64, error) { return tx.Decr("c") }, 9},
				{"decrby", func() (int64, error) { return tx.DecrBy("c", 20) }, -11},
				{"decrby negative adds", func() (int64, error) { return tx.DecrBy("c", -1) }, -10},
				{"decr absent starts at 0", func() (int64, error) { return tx.Decr("d", state.TTL(time.Second)) }, -1},
				{"decrby absent starts at 0", func() (int64, error) { return tx.DecrBy("e", 5) }, -5},
			}
			for _, s := range steps {
				got, err := s.do()
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				assert.Equal(t, s.want, got, s.name)
			}

			_, err := tx.Decr("s")
			assert.ErrorIs(t, err, state.ErrNotInteger)
			_, err = tx.DecrBy("s", 3)
			assert.ErrorIs(t, err, state.ErrNotInteger)
			_, err = tx.Decr("min")
			assert.ErrorIs(t, err, state.ErrOverflow)
			_, err = tx.DecrBy("c", math.MaxInt64)
			assert.ErrorIs(t, err, state.ErrOverflow)
			_, err = tx.DecrBy("fresh", math.MinInt64)
			assert.ErrorIs(t, err, state.ErrOverflow, "-MinInt64 does not exist")
			_, err = tx.Decr("")
			assert.ErrorIs(t, err, state.ErrInvalidKey)
			_, err = tx.DecrBy("fresh", 1, state.TTL(-time.Second))
			assert.ErrorIs(t, err, state.ErrInvalidTTL)
			return nil
		})
		require.NoError(t, err, "a verb's own error does not abort the transaction")
		assert.Equal(t, "int:-10", f.get("c"))
		assert.Equal(t, "int:-1", f.get("d"))
		assert.Equal(t, "int:-5", f.get("e"))
		assert.Equal(t, "bytes:text", f.get("s"), "value unchanged")
		assert.Equal(t, "int:-9223372036854775808", f.get("min"), "value unchanged")
		assert.Equal(t, "<absent>", f.get("fresh"))
		left, err := f.db.TTL(f.ctx, "d")
		require.NoError(t, err)
		assert.Equal(t, time.Second, left, "TTL applies when the verb creates the key")
		left, err = f.db.TTL(f.ctx, "c")
		require.NoError(t, err)
		assert.Equal(t, state.NoExpiry, left, "an existing key keeps its lack of deadline")

		err = f.db.Update(f.ctx, func(tx *state.Tx) error {
			if _, err := tx.Decr("c"); err != nil {
				return err
			}
			_, err := tx.DecrBy("s", 1)
			return err
		})
		assert.ErrorIs(t, err, state.ErrNotInteger)
		assert.Equal(t, "int:-10", f.get("c"), "a returned error rolls back the decrement")
	})
}

func TestUpdateRollsBackOnError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "a", 1))
		boom := errors.New("boom")
		err := f.db.Update(f.ctx, func(tx *state.Tx) error {
			if err := tx.Set("a", 2); err != nil {
				return err
			}
			if _, err := tx.Lease("job", "me", time.Minute); err != nil {
				return err
			}
			if _, err := tx.Incr("b"); err != nil {
				return err
			}
			return boom
		})
		assert.ErrorIs(t, err, boom)
		assert.Equal(t, "int:1", f.get("a"))
		assert.Equal(t, "<absent>", f.get("b"))
		l, err := f.db.Lease(f.ctx, "job", "other", time.Second)
		require.NoError(t, err, "the rolled-back grant is gone")
		assert.Equal(t, int64(1), l.Token, "and its token was never issued")
	})
}

func TestUpdateRollsBackOnPanic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		assert.PanicsWithValue(t, "oops", func() {
			_ = f.db.Update(f.ctx, func(tx *state.Tx) error {
				_ = tx.Set("a", 1)
				panic("oops")
			})
		})
		assert.Equal(t, "<absent>", f.get("a"))
		require.NoError(t, f.db.Set(f.ctx, "a", 2), "the handle still works after a panic")
		assert.Equal(t, "int:2", f.get("a"))
	})
}

func TestUpdateVerbErrorDoesNotAbortUnlessReturned(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "s", "text"))
		err := f.db.Update(f.ctx, func(tx *state.Tx) error {
			_, err := tx.Incr("s")
			assert.ErrorIs(t, err, state.ErrNotInteger)
			_, err = tx.Get("missing")
			assert.ErrorIs(t, err, state.ErrNotFound)
			return tx.Set("after", 1)
		})
		require.NoError(t, err)
		assert.Equal(t, "int:1", f.get("after"))
		assert.Equal(t, "bytes:text", f.get("s"))

		err = f.db.Update(f.ctx, func(tx *state.Tx) error {
			_ = tx.Set("x", 1)
			_, err := tx.Incr("s")
			return err
		})
		assert.ErrorIs(t, err, state.ErrNotInteger)
		assert.Equal(t, "<absent>", f.get("x"))
	})
}

func TestUpdateNilCallback(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		assert.ErrorIs(t, f.db.Update(f.ctx, nil), state.ErrInvalidArgument)
	})
}

// TestTxNowIsTheTransactionsTime reads the transaction's time inside
// Update: it is the time its verbs run at (a deadline written inside counts
// from it), it does not move while the callback runs, and it is the engine's
// time when the transaction began, not when Update was called.
func TestTxNowIsTheTransactionsTime(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		f.clock.Advance(1234 * time.Millisecond)
		began := f.db.Now()
		var first, second time.Time
		require.NoError(t, f.db.Update(f.ctx, func(tx *state.Tx) error {
			var err error
			if first, err = tx.Now(); err != nil {
				return err
			}
			f.clock.Advance(time.Minute) // time passes while the callback runs
			if err := tx.Set("k", "v", state.TTL(time.Hour)); err != nil {
				return err
			}
			second, err = tx.Now()
			return err
		}))
		assert.Equal(t, began, first, "the engine's time when the transaction began")
		assert.Equal(t, first, second, "one time for the whole transaction")
		var expires time.Time
		require.NoError(t, f.db.Scan(f.ctx, "k", false, func(k state.KeyInfo) error { expires = k.Expires; return nil }))
		assert.True(t, first.Add(time.Hour).Equal(expires), "a deadline written inside counts from Now: %v, want %v", expires, first.Add(time.Hour))
	})
}

// TestRolledBackLeaseVerbsLeaveTheCallersLease renews and releases a lease
// inside transactions that roll back: the caller's *Lease must still say
// what the file says. One that commits moves it.
func TestRolledBackLeaseVerbsLeaveTheCallersLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		l, err := f.db.Lease(f.ctx, "job", "a", time.Minute)
		require.NoError(t, err)
		held := *l
		no := errors.New("changed my mind")
		for verb, call := range map[string]func(tx *state.Tx) error{
			"renew":   func(tx *state.Tx) error { return tx.Renew(l, time.Hour) },
			"release": func(tx *state.Tx) error { return tx.Release(l) },
		} {
			err := f.db.Update(f.ctx, func(tx *state.Tx) error {
				if err := call(tx); err != nil {
					return err
				}
				return no
			})
			require.ErrorIs(t, err, no, verb)
			assert.Equal(t, held, *l, "%s rolled back: the lease as it was", verb)
		}
		require.NoError(t, f.db.Update(f.ctx, func(tx *state.Tx) error { return tx.Renew(l, time.Hour) }))
		assert.Equal(t, held.Expires.Add(59*time.Minute), l.Expires, "a renewal that commits moves the lease")
		require.NoError(t, f.db.Renew(f.ctx, l, time.Hour), "and the file agrees")
	})
}

// TestTxAfterUpdateIsRefused keeps a Tx past its Update: every verb on it
// is refused and writes nothing.
func TestTxAfterUpdateIsRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		var kept *state.Tx
		require.NoError(t, f.db.Update(f.ctx, func(tx *state.Tx) error { kept = tx; return nil }))
		err := kept.Set("k", "v")
		require.ErrorIs(t, err, state.ErrInvalidArgument)
		assert.ErrorContains(t, err, "valid only inside its Update callback")
		_, err = kept.Now()
		assert.ErrorIs(t, err, state.ErrInvalidArgument)
		_, err = f.db.Get(f.ctx, "k")
		assert.ErrorIs(t, err, state.ErrNotFound, "nothing written")
	})
}
