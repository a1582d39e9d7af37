package state_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpdateFromManyGoroutinesOnTwoHandles runs transfers between five
// accounts in Updates from 8 goroutines over two handles of one file (as
// two processes would), a fifth of them rolled back by their callback:
// the balances still sum to zero, the count of transfers equals the
// Updates that returned nil, and each transaction reads its own writes.
func TestUpdateFromManyGoroutinesOnTwoHandles(t *testing.T) {
	f := newFixture(t, backends[0])
	other := f.open()
	t.Cleanup(func() { _ = other.Close() })
	abort := errors.New("abort")
	const goroutines, updates = 8, 60
	committed := make([]int, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		db := []*state.DB{f.db, other}[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range updates {
				err := db.Update(f.ctx, func(tx *state.Tx) error {
					from, to := fmt.Sprintf("acct%d", (g+i)%5), fmt.Sprintf("acct%d", (g+i+2)%5)
					if _, err := tx.IncrBy(from, -7); err != nil {
						return err
					}
					if _, err := tx.IncrBy(to, 7); err != nil {
						return err
					}
					n, err := tx.Incr("count")
					if err != nil {
						return err
					}
					v, err := tx.Get("count")
					if err != nil {
						return err
					}
					if got, _ := v.Int(); got != n {
						return fmt.Errorf("read %d after writing %d", got, n)
					}
					if i%5 == 0 {
						return abort
					}
					return nil
				})
				if err == nil {
					committed[g]++
				} else if !errors.Is(err, abort) {
					t.Errorf("goroutine %d, update %d: %v", g, i, err)
				}
			}
		}()
	}
	wg.Wait()
	want := 0
	for _, n := range committed {
		want += n
	}
	require.Equal(t, goroutines*updates*4/5, want)
	sum := int64(0)
	for i := range 5 {
		v, err := other.Get(f.ctx, fmt.Sprintf("acct%d", i))
		require.NoError(t, err)
		n, _ := v.Int()
		sum += n
	}
	assert.Equal(t, int64(0), sum, "no transfer half-written")
	assert.Equal(t, fmt.Sprintf("int:%d", want), f.get("count"), "every committed Update counted once, no rolled-back one")
}
