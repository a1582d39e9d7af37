package state_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentGrantsKeepTokensUnique: goroutines granting, renewing and
// releasing at the same moment (so grants share group commits with each
// other and with Incr) never get one token twice: on one contended name,
// every grant's token is higher than the last one released; on a name
// each, every goroutine counts 1, 2, 3 ... The file agrees afterwards.
// Rounds are counted, not timed.
func TestConcurrentGrantsKeepTokensUnique(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		const goroutines, rounds = 8, 40
		var (
			mu     sync.Mutex
			tokens = map[int64]string{} // on the shared name
			wg     sync.WaitGroup
			errs   = make(chan error, goroutines)
		)
		for g := range goroutines {
			owner := fmt.Sprintf("g%d", g)
			wg.Go(func() {
				for i := range rounds {
					own, err := f.db.Lease(f.ctx, "own:"+owner, owner, time.Minute)
					if err != nil {
						errs <- err
						return
					}
					if own.Token != int64(i+1) {
						errs <- fmt.Errorf("%s: round %d granted token %d", owner, i, own.Token)
						return
					}
					if _, err := f.db.Incr(f.ctx, "n"); err != nil {
						errs <- err
						return
					}
					shared, err := f.db.Lease(f.ctx, "shared", owner, time.Minute)
					if err == nil {
						mu.Lock()
						if prev, dup := tokens[shared.Token]; dup {
							errs <- fmt.Errorf("token %d granted to %s and %s", shared.Token, prev, owner)
						}
						tokens[shared.Token] = owner
						mu.Unlock()
						if err := f.db.Renew(f.ctx, shared, time.Minute); err != nil {
							errs <- err
							return
						}
						if err := f.db.Release(f.ctx, shared); err != nil {
							errs <- err
							return
						}
					} else if !errors.Is(err, state.ErrLeaseHeld) {
						errs <- err
						return
					}
					if err := f.db.Release(f.ctx, own); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.NotEmpty(t, tokens)
		v, err := f.db.Get(f.ctx, "n")
		require.NoError(t, err)
		n, _ := v.Int()
		assert.Equal(t, int64(goroutines*rounds), n)
		last, err := f.db.Lease(f.ctx, "shared", "after", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, int64(len(tokens)+1), last.Token, "every grant of the shared name took the next token, none twice")
	})
}
