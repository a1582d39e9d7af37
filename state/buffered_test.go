package state_test

import (
	"math"
	"sync"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIncrBufferedFlush(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "hits", 100))
		for i := 0; i < 10; i++ {
			require.NoError(t, f.db.IncrBuffered("hits", 1))
			require.NoError(t, f.db.IncrBuffered("misses", 2))
		}
		assert.Equal(t, "int:100", f.get("hits"), "buffered deltas are not visible before a flush")
		assert.Equal(t, "<absent>", f.get("misses"))
		require.NoError(t, f.db.Flush(f.ctx))
		assert.Equal(t, "int:110", f.get("hits"))
		assert.Equal(t, "int:20", f.get("misses"))
		require.NoError(t, f.db.Flush(f.ctx), "an empty flush is fine")
		assert.Equal(t, "int:110", f.get("hits"), "and writes nothing twice")
	})
}

func TestIncrBufferedFlushedOnClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.IncrBuffered("n", 5))
		f.reopen()
		assert.Equal(t, "int:5", f.get("n"))
	})
}

func TestFlushAfterCloseIsErrClosed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.IncrBuffered("n", 5))
		require.NoError(t, f.db.Close())
		assert.ErrorIs(t, f.db.Flush(f.ctx), state.ErrClosed, "after Close flushed the buffer")
		assert.ErrorIs(t, f.db.Flush(f.ctx), state.ErrClosed, "again, with nothing buffered")
		f.db = f.open()
		assert.Equal(t, "int:5", f.get("n"), "Close wrote the buffer once")
	})
}

func TestIncrBufferedBadKeysDropOnlyTheirDelta(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "text", "abc"))
		require.NoError(t, f.db.Set(f.ctx, "big", math.MaxInt64))
		require.NoError(t, f.db.IncrBuffered("text", 1))
		require.NoError(t, f.db.IncrBuffered("big", 1))
		require.NoError(t, f.db.IncrBuffered("ok", 1))
		err := f.db.Flush(f.ctx)
		assert.ErrorIs(t, err, state.ErrNotInteger)
		assert.ErrorIs(t, err, state.ErrOverflow)
		var fe *state.FlushError
		require.ErrorAs(t, err, &fe)
		assert.Len(t, fe.Dropped, 2, "only the bad keys: %v", fe.Dropped)
		assert.ErrorIs(t, fe.Dropped["text"], state.ErrNotInteger)
		assert.ErrorIs(t, fe.Dropped["big"], state.ErrOverflow)
		assert.Equal(t, "int:1", f.get("ok"), "the good key is written")
		assert.Equal(t, "bytes:abc", f.get("text"))
		require.NoError(t, f.db.Flush(f.ctx), "bad deltas were dropped, not retried forever")
	})
}

func TestIncrBufferedOverflowInBuffer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.IncrBuffered("n", math.MaxInt64))
		assert.ErrorIs(t, f.db.IncrBuffered("n", 1), state.ErrOverflow)
		require.NoError(t, f.db.IncrBuffered("n", -1))
		require.NoError(t, f.db.Flush(f.ctx))
		assert.Equal(t, "int:9223372036854775806", f.get("n"))
		assert.ErrorIs(t, f.db.IncrBuffered("", 1), state.ErrInvalidKey)
	})
}

func TestIncrBufferedConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 500; i++ {
					assert.NoError(t, f.db.IncrBuffered("n", 1))
					if i%100 == 0 {
						assert.NoError(t, f.db.Flush(f.ctx))
					}
				}
			}()
		}
		wg.Wait()
		require.NoError(t, f.db.Flush(f.ctx))
		assert.Equal(t, "int:4000", f.get("n"))
	})
}
