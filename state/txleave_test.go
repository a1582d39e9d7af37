package state_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpdateRollsBackWhenTheCallbackLeaves leaves an Update callback by
// runtime.Goexit (as t.FailNow does, a require inside the callback) and by
// a panic, after a write and a renewal: nothing is written, the caller's
// *Lease is as it was, and the handle goes on.
func TestUpdateRollsBackWhenTheCallbackLeaves(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		l, err := f.db.Lease(f.ctx, "job", "me", time.Minute)
		require.NoError(t, err)
		held := *l
		for _, leave := range []string{"goexit", "panic"} {
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { _ = recover() }()
				_ = f.db.Update(f.ctx, func(tx *state.Tx) error {
					if err := tx.Set("k", leave); err != nil {
						return err
					}
					if err := tx.Renew(l, time.Hour); err != nil {
						return err
					}
					if leave == "panic" {
						panic(leave)
					}
					runtime.Goexit()
					return nil
				})
			}()
			wg.Wait()
			assert.Equal(t, "<absent>", f.get("k"), leave)
			assert.Equal(t, held, *l, "%s: the lease as it was", leave)
			require.NoError(t, f.db.Set(f.ctx, "after", leave), "%s: the handle goes on", leave)
		}
		require.NoError(t, f.db.Renew(f.ctx, l, time.Minute), "the file and the lease agree")
	})
}

// TestDBVerbInsideUpdateWaitsForItsContext calls the DB's verbs, not the
// Tx's, inside an Update callback, as its doc warns against: each waits
// for the transaction, which waits for the callback, so it returns its own
// context's error once that ends, having done nothing; the transaction
// then commits what the callback wrote through tx.
func TestDBVerbInsideUpdateWaitsForItsContext(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		calls := map[string]func(ctx context.Context) error{
			"Incr": func(ctx context.Context) error { _, err := f.db.Incr(ctx, "inner"); return err },
			"Get":  func(ctx context.Context) error { _, err := f.db.Get(ctx, "inner"); return err },
			"Lease": func(ctx context.Context) error {
				_, err := f.db.Lease(ctx, "inner", "me", time.Minute)
				return err
			},
			"Update": func(ctx context.Context) error {
				return f.db.Update(ctx, func(tx *state.Tx) error { return tx.Set("inner", 1) })
			},
		}
		for name, call := range calls {
			err := f.db.Update(f.ctx, func(tx *state.Tx) error {
				ctx, cancel := context.WithCancel(f.ctx)
				stop := time.AfterFunc(5*time.Millisecond, cancel) // ends it while it waits
				defer stop.Stop()
				assert.ErrorIs(t, call(ctx), context.Canceled, name)
				return tx.Set("outer", name)
			})
			require.NoError(t, err, name)
			assert.Equal(t, "bytes:"+name, f.get("outer"), name)
			assert.Equal(t, "<absent>", f.get("inner"), "%s did nothing", name)
		}
		l, err := f.db.Lease(f.ctx, "inner", "other", time.Minute)
		require.NoError(t, err, "the inner Lease granted nothing")
		assert.Equal(t, int64(1), l.Token)
	})
}
