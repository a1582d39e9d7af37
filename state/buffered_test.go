package state_test

import (
	"math"
	"strconv"
	"sync"
	"testing"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/hooks"
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

// firstFlushRuns is a flush observer that runs fn once, in the first
// flush, after it took the deltas from the buffer and before it writes.
type firstFlushRuns struct {
	once sync.Once
	fn   func()
}

// Flushing runs fn in the first flush.
func (o *firstFlushRuns) Flushing(map[string]int64) (func(int64), func(int64, error, bool)) {
	o.once.Do(o.fn)
	return nil, nil
}

// TestIncrBufferedOverflowBesideAFlushInFlight: while a flush holds
// MaxInt64 for "n", taken from the buffer, an IncrBuffered("n", 1) finds
// the buffer empty; the flush then writes nothing (a full disk) and puts
// its delta back. The buffered sum must not wrap: before, it became
// MinInt64, and the next Flush dropped "n" naming a delta of
// -9223372036854775808 that nobody buffered, losing both. Every accepted
// delta must be written; one that would take the sum out of int64 is
// refused with ErrOverflow.
func TestIncrBufferedOverflowBesideAFlushInFlight(t *testing.T) {
	fm := newFltMachine(t)
	var db *state.DB
	var during error
	obs := &firstFlushRuns{fn: func() {
		during = db.IncrBuffered("n", 1)
		fm.m.SetWriteBudget(0)
	}}
	db = fm.open(1, hooks.Option(hooks.Engine{Flushes: obs}).(state.Option))
	require.NoError(t, db.Set(fm.ctx, "n", -10))
	require.NoError(t, db.IncrBuffered("n", math.MaxInt64))
	require.ErrorIs(t, db.Flush(fm.ctx), state.ErrDiskFull, "the first flush wrote nothing")
	fm.m.SetWriteBudget(-1)
	require.NoError(t, db.Flush(fm.ctx), "every accepted delta fits: -10 + MaxInt64 (+1)")
	want := int64(math.MaxInt64 - 10) // -10 + MaxInt64
	if during == nil {
		want++ // and the +1, had it been accepted
	}
	assert.Equal(t, strconv.FormatInt(want, 10), fm.get(db, "n"))
	require.ErrorIs(t, during, state.ErrOverflow, "the buffered sum, with the flush's, would leave int64")
}

// TestIncrBufferedAfterCloseIsErrClosed: after Close, IncrBuffered returns
// ErrClosed, as every call does, on a handle that had failed and on a
// read-only one too. Before, it returned the handle's old failure, or
// ErrReadOnly.
func TestIncrBufferedAfterCloseIsErrClosed(t *testing.T) {
	fm := newFltMachine(t)
	db := fm.open(1)
	fm.m.FailAt(faults.OpWrite, 1)
	_, err := db.Incr(fm.ctx, "n")
	require.ErrorIs(t, err, state.ErrIO)
	require.NoError(t, db.Close())
	assert.ErrorIs(t, db.IncrBuffered("n", 1), state.ErrClosed, "a failed handle, closed")

	ro := fm.open(2, state.WithReadOnly())
	require.NoError(t, ro.Close())
	assert.ErrorIs(t, ro.IncrBuffered("n", 1), state.ErrClosed, "a read-only handle, closed")
}

// TestFlushErrorNamesDroppedThenKept: a FlushError's message lists the
// dropped keys, then those kept for the next flush, each sorted with its
// cause, and errors.Is finds every cause.
func TestFlushErrorNamesDroppedThenKept(t *testing.T) {
	fe := &state.FlushError{
		Dropped: map[string]error{"z": state.ErrOverflow, "a": state.ErrNotInteger},
		Kept:    map[string]error{"k": state.ErrUnavailable},
	}
	assert.Equal(t, `statekit: flush dropped "a" (`+state.ErrNotInteger.Error()+`); "z" (`+state.ErrOverflow.Error()+
		`); kept for the next flush "k" (`+state.ErrUnavailable.Error()+`)`, fe.Error())
	for _, cause := range []error{state.ErrOverflow, state.ErrNotInteger, state.ErrUnavailable} {
		assert.ErrorIs(t, fe, cause)
	}
	kept := &state.FlushError{Kept: map[string]error{"k": state.ErrUnavailable}}
	assert.Equal(t, `statekit: flush kept for the next flush "k" (`+state.ErrUnavailable.Error()+`)`, kept.Error())
	dropped := &state.FlushError{Dropped: map[string]error{"a": state.ErrNotInteger, "b": state.ErrOverflow}}
	assert.Equal(t, `statekit: flush dropped "a" (`+state.ErrNotInteger.Error()+`); "b" (`+state.ErrOverflow.Error()+`)`, dropped.Error())
}
