package verbtest

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

// other opens a second handle on the case's store, as another process
// would: state.Open of the name the store was opened with (db.Path()). It
// is closed when the case ends.
func (e *env) other() *state.DB {
	e.t.Helper()
	db, err := state.Open(e.db.Path())
	require.NoError(e.t, err, "open a second handle on %s", e.db.Path())
	e.t.Cleanup(func() { _ = db.Close() })
	return db
}

// handleCases: two handles on one store, as two processes on one file or
// two clients of one server.
var handleCases = []verbCase{
	{"handles/close-writes-the-buffer", func(t *testing.T, e *env) {
		require.NoError(t, e.db.IncrBuffered("n", 5))
		require.NoError(t, e.db.IncrBuffered("m", -2))
		assert.NoError(t, e.db.Close(), "Close flushes buffered increments")
		assert.ErrorIs(t, e.db.Flush(e.ctx), state.ErrClosed, "after Close flushed the buffer")
		assert.ErrorIs(t, e.db.IncrBuffered("n", 1), state.ErrClosed)

		b := e.other()
		for key, want := range map[string]string{"n": "int:5", "m": "int:-2"} {
			got := "<absent>"
			v, err := b.Get(e.ctx, key)
			if err == nil {
				got = show(v)
			} else {
				require.ErrorIs(t, err, state.ErrNotFound)
			}
			assert.Equal(t, want, got, "Close wrote the buffered %q", key)
		}
	}},

	{"handles/close-inside-a-scan-callback", func(t *testing.T, e *env) {
		// Scan calls its callback outside the handle's lock, so the
		// callback may call the DB's methods, Close too: Close does not
		// wait for the Scan that called it (on a server it waits for the
		// verbs in flight, not for a listing).
		for _, k := range []string{"a", "b", "c"} {
			e.set(k, 1)
		}
		var seen []string
		var closeErr error
		err := e.db.Scan(e.ctx, "", false, func(k state.KeyInfo) error {
			seen = append(seen, k.Key)
			if len(seen) == 1 {
				closeErr = e.db.Close()
			}
			return nil
		})
		require.NoError(t, closeErr, "Close from inside the callback")
		t.Logf("Scan after its callback closed the handle: %v, keys %v", err, seen)
		if err != nil {
			assert.ErrorIs(t, err, state.ErrClosed, "a Scan the handle's Close overtook")
		}
		_, err = e.db.Get(e.ctx, "a")
		assert.ErrorIs(t, err, state.ErrClosed, "a verb after the Close")
	}},

	{"handles/share-keys-and-leases", func(t *testing.T, e *env) {
		b := e.other()
		e.set("k", "from a", state.TTL(time.Hour))
		v, err := b.Get(e.ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, "bytes:from a", show(v), "a write of one handle is seen by the other")
		left, err := b.TTL(e.ctx, "k")
		require.NoError(t, err)
		assert.Greater(t, left, time.Hour-time.Minute)
		assert.LessOrEqual(t, left, time.Hour)
		n, err := b.Del(e.ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.Equal(t, "<absent>", e.get("k"))

		l := e.lease("job", "a", time.Hour)
		_, err = b.Lease(e.ctx, "job", "b", time.Minute)
		var held *state.LeaseHeldError
		require.ErrorAs(t, err, &held, "a lease of one handle is held against the other")
		assert.Equal(t, "a", held.Owner)
		again, err := b.Lease(e.ctx, "job", "a", time.Hour)
		require.NoError(t, err, "the same owner through another handle")
		assert.Equal(t, l.Token, again.Token, "is the same lease")
		require.NoError(t, b.Release(e.ctx, again))
		assert.ErrorIs(t, e.db.Renew(e.ctx, l, time.Minute), state.ErrLeaseLost, "released through the other handle")
		next, err := b.Lease(e.ctx, "job", "b", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, l.Token+1, next.Token, "tokens continue across handles")
	}},

	{"handles/concurrent-updates", func(t *testing.T, e *env) {
		handles := []*state.DB{e.db, e.other()}
		const goroutines, each = 4, 25 // per handle
		e.set("n", 0)
		var wg sync.WaitGroup
		errs := make(chan error, len(handles)*goroutines*each)
		for h, db := range handles {
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						err := db.Update(e.ctx, func(tx *state.Tx) error {
							v, err := tx.Get("n")
							if err != nil {
								return err
							}
							n, ok := v.Int()
							if !ok {
								return errors.New("n is not an integer")
							}
							return tx.Set("n", n+1)
						})
						if err != nil {
							errs <- fmt.Errorf("handle %d goroutine %d update %d: %w", h, g, i, err)
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		assert.Equal(t, fmt.Sprintf("int:%d", len(handles)*goroutines*each), e.get("n"), "no update lost across handles")
	}},
}
