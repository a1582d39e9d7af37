package verbtest

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bufferedCases: IncrBuffered and Flush. A store opened with default
// options also flushes in the background, at any moment: the cases check
// sums after an explicit Flush, never what is visible before one.
var bufferedCases = []verbCase{
	{"buffered/flush-sums", func(t *testing.T, e *env) {
		e.set("hits", 100)
		for range 10 {
			require.NoError(t, e.db.IncrBuffered("hits", 1))
			require.NoError(t, e.db.IncrBuffered("misses", 2))
			require.NoError(t, e.db.IncrBuffered("down", -3))
		}
		require.NoError(t, e.db.IncrBuffered("zero", 0))
		require.NoError(t, e.db.Flush(e.ctx))
		assert.Equal(t, "int:110", e.get("hits"))
		assert.Equal(t, "int:20", e.get("misses"))
		assert.Equal(t, "int:-30", e.get("down"))
		e.noExpiry("misses", "a flushed counter gets no deadline")
		require.NoError(t, e.db.Flush(e.ctx), "an empty flush is fine")
		assert.Equal(t, "int:110", e.get("hits"), "and writes nothing twice")
	}},

	{"buffered/keeps-deadline", func(t *testing.T, e *env) {
		e.set("t", 1, state.TTL(time.Hour))
		require.NoError(t, e.db.IncrBuffered("t", 2))
		require.NoError(t, e.db.Flush(e.ctx))
		assert.Equal(t, "int:3", e.get("t"))
		e.ttlWithin("t", time.Hour, "a flush keeps the key's deadline, as IncrBy does")
	}},

	{"buffered/flush-error-names-bad-keys", func(t *testing.T, e *env) {
		e.set("text", "abc")
		e.set("big", int64(math.MaxInt64))
		// A background flush may take the deltas between IncrBuffered and
		// Flush, and its error goes nowhere a caller sees: a few attempts,
		// one of which must report through Flush. "ok" counts every
		// attempt either way.
		const attempts = 10
		reported := false
		for i := range attempts {
			require.NoError(t, e.db.IncrBuffered("text", 1))
			require.NoError(t, e.db.IncrBuffered("big", 1))
			require.NoError(t, e.db.IncrBuffered("ok", 1))
			err := e.db.Flush(e.ctx)
			assert.Equal(t, fmt.Sprintf("int:%d", i+1), e.get("ok"), "the good key is written")
			assert.Equal(t, "bytes:abc", e.get("text"), "a bytes value is unchanged")
			assert.Equal(t, "int:9223372036854775807", e.get("big"), "an overflowing sum is not written")
			if err == nil {
				continue
			}
			var fe *state.FlushError
			require.ErrorAs(t, err, &fe)
			assert.ErrorContains(t, err, "flush")
			keys := make([]string, 0, len(fe.Dropped))
			for k := range fe.Dropped {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			assert.Subset(t, []string{"big", "text"}, keys, "Dropped names the bad keys only")
			if len(keys) == 2 {
				reported = true
				assert.ErrorIs(t, err, state.ErrNotInteger)
				assert.ErrorIs(t, err, state.ErrOverflow)
				assert.ErrorIs(t, fe.Dropped["text"], state.ErrNotInteger)
				assert.ErrorIs(t, fe.Dropped["big"], state.ErrOverflow)
				assert.Contains(t, err.Error(), "text")
				assert.Contains(t, err.Error(), "big")
				break
			}
		}
		assert.True(t, reported, "Flush never reported both bad keys in %d attempts", attempts)
		require.NoError(t, e.db.Flush(e.ctx), "bad deltas were dropped, not retried forever")
	}},

	{"buffered/overflow-in-buffer", func(t *testing.T, e *env) {
		// As above, a background flush may empty the buffer between the
		// two calls: a few attempts, on fresh keys.
		const attempts = 10
		refused := false
		for i := range attempts {
			key := fmt.Sprintf("n%d", i)
			require.NoError(t, e.db.IncrBuffered(key, math.MaxInt64))
			err := e.db.IncrBuffered(key, 1)
			if err == nil {
				continue // flushed in between; the next Flush drops the overflow
			}
			assert.ErrorIs(t, err, state.ErrOverflow)
			assert.ErrorContains(t, err, fmt.Sprintf("incrbuffered %q", key))
			require.NoError(t, e.db.IncrBuffered(key, -1), "the buffer was left as it was")
			err = e.db.Flush(e.ctx)
			var fe *state.FlushError
			if errors.As(err, &fe) {
				assert.NotContains(t, fe.Dropped, key)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, "int:9223372036854775806", e.get(key))
			refused = true
			break
		}
		assert.True(t, refused, "IncrBuffered never refused a buffered overflow in %d attempts", attempts)
		err := e.db.IncrBuffered("", 1)
		assert.ErrorIs(t, err, state.ErrInvalidKey)
	}},

	{"buffered/concurrent", func(t *testing.T, e *env) {
		const goroutines, each = 8, 500
		var wg sync.WaitGroup
		errs := make(chan error, goroutines*each)
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if err := e.db.IncrBuffered("n", 1); err != nil {
						errs <- err
					}
					if i%100 == 0 {
						if err := e.db.Flush(e.ctx); err != nil {
							errs <- err
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		require.NoError(t, e.db.Flush(e.ctx))
		assert.Equal(t, fmt.Sprintf("int:%d", goroutines*each), e.get("n"))
	}},
}
