package redisstate_test

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

var errTorn = errors.New("a+b is not 100")

// Update's callback returns what it read, through its error or through a
// variable when it returns nil: either holds only if no watched key
// changed after it was read. Each read is a round trip of its own, so
// another writer can commit between two of them; the callback's error, or
// a nil return of a transaction that wrote nothing, must be checked
// against the watches (an empty MULTI/EXEC) and the callback run again on
// a conflict, as a commit is. A writer moves 1 between a and b, which sum
// to 100 at every commit; a reader that sees another sum saw no state.
func TestUpdateCallbackSeesOneState(t *testing.T) {
	db, _ := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "a", 50))
	require.NoError(t, db.Set(ctx, "b", 50))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for d := int64(1); ; d = -d {
			select {
			case <-stop:
				return
			default:
			}
			_ = db.Update(ctx, func(tx *state.Tx) error {
				if _, err := tx.IncrBy("a", -d); err != nil {
					return err
				}
				_, err := tx.IncrBy("b", d)
				return err
			})
		}
	}()
	sum := func(tx *state.Tx) (int64, error) {
		va, err := tx.Get("a")
		if err != nil {
			return 0, err
		}
		time.Sleep(100 * time.Microsecond) // room for the writer between the reads
		vb, err := tx.Get("b")
		if err != nil {
			return 0, err
		}
		a, _ := va.Int()
		b, _ := vb.Int()
		return a + b, nil
	}
	var tornErr, tornNil, busy, runs int
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); runs++ {
		err := db.Update(ctx, func(tx *state.Tx) error {
			s, err := sum(tx)
			if err != nil {
				return err
			}
			if s != 100 {
				return fmt.Errorf("%w: %d", errTorn, s)
			}
			return nil
		})
		if errors.Is(err, errTorn) {
			tornErr++
		} else if errors.Is(err, state.ErrBusy) {
			busy++
		} else if err != nil {
			t.Fatal(err)
		}
		var seen int64
		err = db.Update(ctx, func(tx *state.Tx) error {
			var err error
			seen, err = sum(tx)
			return err
		})
		if err == nil && seen != 100 {
			tornNil++
		} else if errors.Is(err, state.ErrBusy) {
			busy++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d runs, %d of their Updates gave up with ErrBusy", runs, busy)
	assert.Zero(t, tornErr, "Update returned the callback's error drawn from reads of two states")
	assert.Zero(t, tornNil, "Update returned nil after a callback that wrote nothing read two states")
}
