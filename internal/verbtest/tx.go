package verbtest

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// txCases: Update and the verbs of a Tx.
var txCases = []verbCase{
	{"update/commits-every-verb", func(t *testing.T, e *env) {
		e.set("old", "x")
		e.set("gone", "y")
		var lease *state.Lease
		err := e.db.Update(e.ctx, func(tx *state.Tx) error {
			if err := tx.Set("a", "1", state.TTL(time.Minute)); err != nil {
				return err
			}
			v, err := tx.Get("a")
			if err != nil {
				return err
			}
			if v.String() != "1" || v.IsInt() {
				return fmt.Errorf("a tx reads its own writes: got %s", show(v))
			}
			if n, err := tx.Incr("n"); err != nil || n != 1 {
				return errors.Join(err, fmt.Errorf("incr: %d", n))
			}
			if n, err := tx.IncrBy("n", 9); err != nil || n != 10 {
				return errors.Join(err, fmt.Errorf("incrby: %d", n))
			}
			if v, err := tx.Get("n"); err != nil || show(v) != "int:10" {
				return errors.Join(err, fmt.Errorf("get n: %s", show(v)))
			}
			if ok, err := tx.CAS("a", "1", "2"); err != nil || !ok {
				return errors.Join(err, errors.New("cas did not swap"))
			}
			if left, err := tx.TTL("a"); err != nil || left <= 0 || left > time.Minute {
				return errors.Join(err, fmt.Errorf("a swap keeps the deadline: ttl %v", left))
			}
			if ok, err := tx.Expire("n", time.Hour); err != nil || !ok {
				return errors.Join(err, errors.New("expire did nothing"))
			}
			if left, err := tx.TTL("n"); err != nil || left <= time.Hour-time.Minute || left > time.Hour {
				return errors.Join(err, fmt.Errorf("ttl %v", left))
			}
			if n, err := tx.Del("old", "missing", "old"); err != nil || n != 1 {
				return errors.Join(err, fmt.Errorf("del: %d", n))
			}
			if _, err := tx.Get("old"); !errors.Is(err, state.ErrNotFound) {
				return fmt.Errorf("a tx sees its own delete: %v", err)
			}
			if ok, err := tx.Expire("gone", 0); err != nil || !ok {
				return errors.Join(err, errors.New("expire 0 did not delete"))
			}
			if _, err := tx.TTL("gone"); !errors.Is(err, state.ErrNotFound) {
				return fmt.Errorf("a tx sees its own expire 0: %v", err)
			}
			lease, err = tx.Lease("job", "me", time.Minute)
			return err
		})
		require.NoError(t, err)
		assert.Equal(t, "bytes:2", e.get("a"))
		e.ttlWithin("a", time.Minute, "Tx.Set's TTL, kept by Tx.CAS")
		assert.Equal(t, "int:10", e.get("n"))
		e.ttlWithin("n", time.Hour, "Tx.Expire's deadline")
		assert.Equal(t, "<absent>", e.get("old"))
		assert.Equal(t, "<absent>", e.get("gone"))
		require.NotNil(t, lease)
		assert.Equal(t, int64(1), lease.Token)
		assert.Equal(t, "job", lease.Name)
		assert.Equal(t, "me", lease.Owner)
		_, err = e.db.Lease(e.ctx, "job", "other", time.Second)
		assert.ErrorIs(t, err, state.ErrLeaseHeld, "the grant committed")
	}},

	{"update/deadlines-as-outside", func(t *testing.T, e *env) {
		e.set("k", "a", state.TTL(time.Hour))
		e.set("c", 1, state.TTL(time.Hour))
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error {
			if err := tx.Set("k", 2); err != nil {
				return err
			}
			if left, err := tx.TTL("k"); err != nil || left != state.NoExpiry {
				return errors.Join(err, fmt.Errorf("tx.Set without TTL keeps a deadline inside the tx: %v", left))
			}
			if _, err := tx.Incr("c", state.TTL(time.Minute)); err != nil {
				return err
			}
			if _, err := tx.Incr("new", state.TTL(time.Minute)); err != nil {
				return err
			}
			_, err := tx.IncrBy("new", 1, state.TTL(time.Hour))
			return err
		}))
		assert.Equal(t, "int:2", e.get("k"))
		e.noExpiry("k", "Tx.Set without TTL drops the deadline")
		assert.Equal(t, "int:2", e.get("c"))
		e.ttlWithin("c", time.Hour, "Tx.Incr on an existing key keeps its deadline")
		assert.Equal(t, "int:2", e.get("new"))
		e.ttlWithin("new", time.Minute, "Tx.Incr that creates the key gives the TTL; a later one in the tx keeps it")
	}},

	{"update/lease-verbs-inside", func(t *testing.T, e *env) {
		var l *state.Lease
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error {
			var err error
			l, err = tx.Lease("job", "me", time.Minute)
			if err != nil {
				return err
			}
			again, err := tx.Lease("job", "me", time.Minute)
			if err != nil || again.Token != l.Token {
				return errors.Join(err, errors.New("a same-owner regrant inside a tx changed the token"))
			}
			if l.Extended || !again.Extended {
				return fmt.Errorf("inside a tx: the first grant extended=%v (want false), the regrant extended=%v (want true)", l.Extended, again.Extended)
			}
			_, err = tx.Lease("job", "other", time.Minute)
			var held *state.LeaseHeldError
			if !errors.As(err, &held) || held.Owner != "me" {
				return fmt.Errorf("another owner inside the tx: want a LeaseHeldError naming me, got %v", err)
			}
			return nil // the verb's error is not returned: the grant commits
		}))
		require.NotNil(t, l)
		assert.Equal(t, int64(1), l.Token)

		first := l.Expires
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error { return tx.Renew(l, time.Hour) }))
		assert.True(t, l.Expires.After(first), "Tx.Renew moves Expires")
		assert.Equal(t, int64(1), l.Token)
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error { return tx.Release(l) }))
		assert.ErrorIs(t, e.db.Release(e.ctx, l), state.ErrLeaseLost, "Tx.Release committed")

		var errRenew, errRelease error
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error {
			errRenew = tx.Renew(l, time.Minute)
			errRelease = tx.Release(l)
			return nil
		}))
		assert.ErrorIs(t, errRenew, state.ErrLeaseLost)
		assert.ErrorIs(t, errRelease, state.ErrLeaseLost)
		next := e.lease("job", "other", time.Minute)
		assert.Equal(t, int64(2), next.Token)
	}},

	{"update/decr-verbs", func(t *testing.T, e *env) {
		e.set("c", 10)
		e.set("s", "text")
		e.set("min", int64(math.MinInt64))
		err := e.db.Update(e.ctx, func(tx *state.Tx) error {
			steps := []struct {
				name string
				do   func() (int64, error)
				want int64
			}{
				{"decr", func() (int64, error) { return tx.Decr("c") }, 9},
				{"decrby", func() (int64, error) { return tx.DecrBy("c", 20) }, -11},
				{"decrby negative adds", func() (int64, error) { return tx.DecrBy("c", -1) }, -10},
				{"decr absent starts at 0", func() (int64, error) { return tx.Decr("d", state.TTL(time.Minute)) }, -1},
				{"decrby absent starts at 0", func() (int64, error) { return tx.DecrBy("e", 5) }, -5},
			}
			for _, s := range steps {
				got, err := s.do()
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				if got != s.want {
					return fmt.Errorf("%s: got %d, want %d", s.name, got, s.want)
				}
			}
			refused := []struct {
				name string
				do   func() (int64, error)
				want error
			}{
				{"decr bytes", func() (int64, error) { return tx.Decr("s") }, state.ErrNotInteger},
				{"decrby bytes", func() (int64, error) { return tx.DecrBy("s", 3) }, state.ErrNotInteger},
				{"incr bytes", func() (int64, error) { return tx.Incr("s") }, state.ErrNotInteger},
				{"decr min", func() (int64, error) { return tx.Decr("min") }, state.ErrOverflow},
				{"decrby max", func() (int64, error) { return tx.DecrBy("c", math.MaxInt64) }, state.ErrOverflow},
				{"decrby minint64", func() (int64, error) { return tx.DecrBy("fresh", math.MinInt64) }, state.ErrOverflow},
				{"incrby overflow", func() (int64, error) { return tx.IncrBy("min", -1) }, state.ErrOverflow},
				{"decr empty key", func() (int64, error) { return tx.Decr("") }, state.ErrInvalidKey},
				{"decrby bad ttl", func() (int64, error) { return tx.DecrBy("fresh", 1, state.TTL(-time.Second)) }, state.ErrInvalidTTL},
			}
			for _, r := range refused {
				if _, err := r.do(); !errors.Is(err, r.want) {
					return fmt.Errorf("%s: want %v, got %v", r.name, r.want, err)
				}
			}
			return nil
		})
		require.NoError(t, err, "a verb's own error does not abort the transaction")
		assert.Equal(t, "int:-10", e.get("c"))
		assert.Equal(t, "int:-1", e.get("d"))
		assert.Equal(t, "int:-5", e.get("e"))
		assert.Equal(t, "bytes:text", e.get("s"), "value unchanged")
		assert.Equal(t, "int:-9223372036854775808", e.get("min"), "value unchanged")
		assert.Equal(t, "<absent>", e.get("fresh"))
		e.ttlWithin("d", time.Minute, "TTL applies when the verb creates the key")
		e.noExpiry("c", "an existing key keeps its lack of deadline")
	}},

	{"update/fn-error-rolls-back", func(t *testing.T, e *env) {
		e.set("a", 1)
		e.set("d", "keep", state.TTL(time.Hour))
		e.set("x", "v")
		held := e.lease("held", "me", time.Hour)
		boom := errors.New("boom")
		err := e.db.Update(e.ctx, func(tx *state.Tx) error {
			steps := []error{
				tx.Set("a", 2),
				tx.Set("new", "n", state.TTL(time.Minute)),
				func() error { _, err := tx.Lease("job", "me", time.Minute); return err }(),
				func() error { _, err := tx.Incr("b"); return err }(),
				func() error { _, err := tx.Del("d"); return err }(),
				func() error { _, err := tx.Expire("x", time.Minute); return err }(),
				func() error { _, err := tx.CAS("x", "v", "w"); return err }(),
				tx.Release(held),
			}
			if err := errors.Join(steps...); err != nil {
				return fmt.Errorf("a step failed: %w", err)
			}
			return boom
		})
		require.ErrorIs(t, err, boom)
		assert.Equal(t, "int:1", e.get("a"))
		assert.Equal(t, "<absent>", e.get("new"))
		assert.Equal(t, "<absent>", e.get("b"))
		assert.Equal(t, "bytes:keep", e.get("d"))
		e.ttlWithin("d", time.Hour, "deadline untouched")
		assert.Equal(t, "bytes:v", e.get("x"))
		e.noExpiry("x", "the rolled-back Expire left no deadline")
		require.NoError(t, e.db.Renew(e.ctx, held, time.Hour), "the rolled-back release did not end the lease")
		l := e.lease("job", "other", time.Second)
		assert.Equal(t, int64(1), l.Token, "the rolled-back grant's token was never issued")
	}},

	{"update/panic-rolls-back", func(t *testing.T, e *env) {
		assert.PanicsWithValue(t, "oops", func() {
			_ = e.db.Update(e.ctx, func(tx *state.Tx) error {
				_ = tx.Set("a", 1)
				panic("oops")
			})
		})
		assert.Equal(t, "<absent>", e.get("a"))
		e.set("a", 2)
		assert.Equal(t, "int:2", e.get("a"), "the store still works after a panic")
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error { return tx.Set("b", 3) }))
		assert.Equal(t, "int:3", e.get("b"), "and so does Update")
	}},

	// A callback that leaves by a panic or runtime.Goexit (a require
	// inside it) after a Renew or a Release commits nothing, so the
	// caller's *Lease must be as it was, as when it returns an error: a
	// holder that recovers must not believe its lease lasts an hour it
	// was never given, or that it released a lease it still holds.
	{"update/callback-leaving-puts-the-lease-back", func(t *testing.T, e *env) {
		l := e.lease("job", "me", time.Minute)
		held := *l
		for _, leave := range []string{"panic after renew", "goexit after renew", "panic after release", "goexit after release"} {
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { _ = recover() }()
				_ = e.db.Update(e.ctx, func(tx *state.Tx) error {
					if err := tx.Set("k", leave); err != nil {
						return err
					}
					var err error
					if strings.HasSuffix(leave, "renew") {
						err = tx.Renew(l, time.Hour)
					} else {
						err = tx.Release(l)
					}
					if err != nil {
						return err
					}
					if strings.HasPrefix(leave, "panic") {
						panic(leave)
					}
					runtime.Goexit()
					return nil
				})
			}()
			wg.Wait()
			assert.Equal(t, "<absent>", e.get("k"), "%s: nothing written", leave)
			assert.Equal(t, held, *l, "%s: the caller's lease as it was", leave)
		}
		require.NoError(t, e.db.Renew(e.ctx, l, time.Minute), "the store and the lease agree: still held")
	}},

	{"update/verb-error-does-not-abort-unless-returned", func(t *testing.T, e *env) {
		e.set("s", "text")
		err := e.db.Update(e.ctx, func(tx *state.Tx) error {
			if _, err := tx.Get("missing"); !errors.Is(err, state.ErrNotFound) {
				return fmt.Errorf("tx.Get missing: %v", err)
			}
			if _, err := tx.TTL("missing"); !errors.Is(err, state.ErrNotFound) {
				return fmt.Errorf("tx.TTL missing: %v", err)
			}
			if _, err := tx.Incr("s"); !errors.Is(err, state.ErrNotInteger) {
				return fmt.Errorf("tx.Incr bytes: %v", err)
			}
			return tx.Set("after", 1)
		})
		require.NoError(t, err)
		assert.Equal(t, "int:1", e.get("after"))
		assert.Equal(t, "bytes:text", e.get("s"))

		var getErr error
		err = e.db.Update(e.ctx, func(tx *state.Tx) error {
			if err := tx.Set("x", 1); err != nil {
				return err
			}
			_, getErr = tx.Get("missing")
			return getErr
		})
		assert.ErrorIs(t, err, state.ErrNotFound, "a returned verb error aborts")
		assert.Equal(t, getErr, err, "Update returns the callback's error as it is")
		assert.ErrorContains(t, err, `get "missing"`)
		assert.Equal(t, "<absent>", e.get("x"), "and rolls back")

		var incrErr error
		err = e.db.Update(e.ctx, func(tx *state.Tx) error {
			_ = tx.Set("y", 1)
			_, incrErr = tx.Incr("s")
			return incrErr
		})
		assert.ErrorIs(t, err, state.ErrNotInteger)
		assert.Equal(t, incrErr, err)
		assert.ErrorContains(t, err, `incr "s"`)
		assert.Equal(t, "<absent>", e.get("y"))
	}},

	{"update/nil-fn", func(t *testing.T, e *env) {
		err := e.db.Update(e.ctx, nil)
		assert.ErrorIs(t, err, state.ErrInvalidArgument)
		assert.ErrorContains(t, err, "update")
	}},

	{"update/concurrent-read-modify-write", func(t *testing.T, e *env) {
		const goroutines, each = 8, 25
		e.set("n", 0)
		var wg sync.WaitGroup
		errs := make(chan error, goroutines*each)
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					err := e.db.Update(e.ctx, func(tx *state.Tx) error {
						v, err := tx.Get("n")
						if err != nil {
							return err
						}
						n, ok := v.Int()
						if !ok {
							return fmt.Errorf("n is %s", show(v))
						}
						if err := tx.Set("n", n+1); err != nil {
							return err
						}
						_, err = tx.Incr(fmt.Sprintf("g%d", g))
						return err
					})
					if err != nil {
						errs <- fmt.Errorf("goroutine %d, update %d: %w", g, i, err)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		assert.Equal(t, fmt.Sprintf("int:%d", goroutines*each), e.get("n"), "no update lost")
		for g := range goroutines {
			assert.Equal(t, fmt.Sprintf("int:%d", each), e.get(fmt.Sprintf("g%d", g)))
		}
	}},

	{"update/concurrent-incr", func(t *testing.T, e *env) {
		const goroutines, each = 8, 50
		var wg sync.WaitGroup
		errs := make(chan error, goroutines*each)
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if _, err := e.db.Incr(e.ctx, "n"); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		assert.Equal(t, fmt.Sprintf("int:%d", goroutines*each), e.get("n"))
	}},

	{"update/cas-with-ttl", func(t *testing.T, e *env) {
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error {
			ok, err := tx.CAS("t", nil, "in-tx", state.TTL(time.Minute))
			if err != nil || !ok {
				return errors.Join(err, errors.New("tx.CAS did not create"))
			}
			ok, err = tx.CAS("t", nil, "again")
			if err != nil || ok {
				return errors.Join(err, errors.New("tx.CAS created twice"))
			}
			ok, err = tx.CAS("u", nil, 1)
			if err != nil || !ok {
				return errors.Join(err, errors.New("tx.CAS without TTL did not create"))
			}
			ok, err = tx.CAS("u", 1, nil)
			if err != nil || !ok {
				return errors.Join(err, errors.New("tx.CAS delete did not match"))
			}
			_, err = tx.CAS("t", "in-tx", nil, state.TTL(time.Second))
			if !errors.Is(err, state.ErrInvalidArgument) {
				return fmt.Errorf("tx.CAS delete with TTL: %v", err)
			}
			return nil
		}))
		assert.Equal(t, "bytes:in-tx", e.get("t"))
		e.ttlWithin("t", time.Minute, "Tx.CAS takes the TTL too")
		assert.Equal(t, "<absent>", e.get("u"))
	}},
}
