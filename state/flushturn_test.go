package state_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowFirstFlush is a flush observer that holds the first flush, after it
// took the deltas from the buffer and before it writes them, for hold.
type slowFirstFlush struct {
	once    sync.Once
	entered chan struct{}
	hold    time.Duration
}

// Flushing holds the first flush.
func (o *slowFirstFlush) Flushing(map[string]int64) (func(int64), func(int64, error, bool)) {
	o.once.Do(func() {
		close(o.entered)
		time.Sleep(o.hold)
	})
	return nil, nil
}

// Flush waits for a background flush in flight: when it returns nil, every
// increment buffered before the call is written, though the background
// flush had taken them from the buffer.
func TestFlushWaitsForTheBackgroundFlush(t *testing.T) {
	obs := &slowFirstFlush{entered: make(chan struct{}), hold: 300 * time.Millisecond}
	db, err := state.Open(filepath.Join(t.TempDir(), "f.state"), state.WithFlushInterval(5*time.Millisecond),
		hooks.Option(hooks.Engine{Flushes: obs}).(state.Option))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	require.NoError(t, db.IncrBuffered("n", 5))
	<-obs.entered // the background flush took the delta
	require.NoError(t, db.Flush(ctx))
	v, err := db.Get(ctx, "n")
	require.NoError(t, err, "Flush returned nil before the delta was written")
	assert.Equal(t, "5", v.String())

	// A Flush whose context ends while it waits says so. The background
	// flush is held until then (with a 300 ms pause, a test goroutine
	// that ran late found it over, and Flush returned nil).
	obs2 := &heldFlush{entered: make(chan struct{}), release: make(chan struct{})}
	db2, err := state.Open(filepath.Join(t.TempDir(), "g.state"), state.WithFlushInterval(5*time.Millisecond),
		hooks.Option(hooks.Engine{Flushes: obs2}).(state.Option))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db2.Close() })
	require.NoError(t, db2.IncrBuffered("n", 5))
	<-obs2.entered
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err = db2.Flush(short)
	close(obs2.release)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, db2.Flush(ctx))
	v, err = db2.Get(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, "5", v.String(), "the held flush wrote the delta once let go")
}

// A background flush's error reaches the program: a key whose delta it
// dropped is named by the next Flush, once, and one that no Flush
// reported is named by Close.
func TestBackgroundFlushErrorsAreReported(t *testing.T) {
	ctx := context.Background()
	open := func() *state.DB {
		db, err := state.Open(filepath.Join(t.TempDir(), "f.state"), state.WithFlushInterval(5*time.Millisecond))
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		require.NoError(t, db.Set(ctx, "b", "bytes"))
		require.NoError(t, db.IncrBuffered("b", 1))
		require.NoError(t, db.IncrBuffered("n", 2))
		deadline := time.Now().Add(10 * time.Second)
		for {
			if v, err := db.Get(ctx, "n"); err == nil && v.String() == "2" {
				return db
			}
			require.True(t, time.Now().Before(deadline), "no background flush")
			time.Sleep(5 * time.Millisecond)
		}
	}
	db := open()
	err := db.Flush(ctx)
	var fe *state.FlushError
	require.True(t, errors.As(err, &fe), "the next Flush reports the background flush's dropped key: %v", err)
	assert.ErrorIs(t, fe.Dropped["b"], state.ErrNotInteger)
	assert.Contains(t, err.Error(), "background flush")
	assert.ErrorIs(t, err, state.ErrBackgroundFlush, "marked as an earlier background flush's")
	require.NoError(t, db.Flush(ctx), "reported once")
	require.NoError(t, db.Close())

	db = open()
	err = db.Close()
	require.ErrorIs(t, err, state.ErrNotInteger, "Close reports what no Flush did")
	assert.ErrorIs(t, err, state.ErrBackgroundFlush)
	assert.Contains(t, err.Error(), `"b"`)
}

// TestBackgroundFlushIOErrorIsReportedByTheNextFlush: a background flush
// that ends the handle with an I/O error loses its deltas with it; the
// next Flush says so, naming them, as for any background flush that lost
// its deltas, beside the handle's failure, and Close does not say it
// again. Before, Flush returned only "the handle failed earlier", and the
// lost increments were named by Close alone.
func TestBackgroundFlushIOErrorIsReportedByTheNextFlush(t *testing.T) {
	m := faults.NewMemFS(1)
	db, err := state.Open("bg.state", state.WithFS(m.Process(1)), state.WithFlushInterval(time.Millisecond), state.WithSweepInterval(0))
	require.NoError(t, err)
	require.NoError(t, db.IncrBuffered("n", 7))
	m.FailAt(faults.OpWrite, 1) // the background flush's first write
	deadline := time.Now().Add(10 * time.Second)
	for db.IncrBuffered("m", 0) == nil {
		require.True(t, time.Now().Before(deadline), "no background flush")
		time.Sleep(time.Millisecond)
	}
	err = db.Flush(context.Background())
	require.ErrorIs(t, err, state.ErrIO)
	assert.ErrorIs(t, err, state.ErrBackgroundFlush, "the background flush's own error: %v", err)
	assert.Contains(t, err.Error(), `"n" +7`, "names what the background flush lost")
	closeErr := db.Close()
	if closeErr != nil {
		assert.NotContains(t, closeErr.Error(), `"n" +7`, "reported once")
	}
}

// TestBackgroundFlushErrorIsReportedBesideTheFlushsOwn: a Flush that has
// an earlier background flush's error to report and drops a key of its own
// returns both, each naming its key and delta, and writes its good keys;
// the next Flush says nothing more. The background flusher runs when the
// test lets its wait through the clock go, so which flush takes which
// delta is the test's choice.
func TestBackgroundFlushErrorIsReportedBesideTheFlushsOwn(t *testing.T) {
	clock := &heldSleeper{Clock: newClock(), asked: make(chan heldSleep)}
	db, err := state.Open(filepath.Join(t.TempDir(), "f.state"), state.WithClock(clock))
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	held := map[time.Duration][]heldSleep{}
	flush := clock.next(t, state.DefaultFlushInterval, held)

	require.NoError(t, db.Set(ctx, "b", "bytes"))
	require.NoError(t, db.IncrBuffered("b", 1))
	require.NoError(t, db.IncrBuffered("n", 2))
	close(flush.done)
	clock.next(t, state.DefaultFlushInterval, held) // the background flush ran, and dropped "b"
	v, err := db.Get(ctx, "n")
	require.NoError(t, err)
	require.Equal(t, "2", v.String(), "the background flush wrote its good key")

	require.NoError(t, db.Set(ctx, "c", "bytes"))
	require.NoError(t, db.IncrBuffered("c", 3))
	require.NoError(t, db.IncrBuffered("n", 1))
	err = db.Flush(ctx)
	require.ErrorIs(t, err, state.ErrBackgroundFlush, "%v", err)
	require.ErrorIs(t, err, state.ErrNotInteger)
	msg := err.Error()
	assert.Regexp(t, `background flush: .*"b" \(delta 1 dropped`, msg, "the background flush's dropped key and delta")
	assert.Contains(t, msg, `"c" (delta 3 dropped`, "the Flush's own dropped key and delta, beside it")
	v, err = db.Get(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, "3", v.String(), "the Flush wrote its good key")
	require.NoError(t, db.Flush(ctx), "each reported once")
	require.NoError(t, db.Close(), "nothing left for Close to report")
}

// TestBackgroundFlushErrorsPastEightAreCounted: Flush names the errors of
// eight background flushes that lost deltas, each once, and counts those
// past them; the next Flush returns none again. Each background round is
// let go by the test's clock, so exactly ten run.
func TestBackgroundFlushErrorsPastEightAreCounted(t *testing.T) {
	clock := &heldSleeper{Clock: newClock(), asked: make(chan heldSleep)}
	db, err := state.Open(filepath.Join(t.TempDir(), "lost.state"), state.WithClock(clock), state.WithSweepInterval(0))
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	require.NoError(t, db.Set(ctx, "b", "bytes"))
	held := map[time.Duration][]heldSleep{}
	round := clock.next(t, state.DefaultFlushInterval, held)
	const rounds = checks.MaxLostNamed + 2
	for i := range rounds {
		require.NoError(t, db.IncrBuffered("b", int64(i+1)))
		close(round.done)
		round = clock.next(t, state.DefaultFlushInterval, held) // that round dropped b's delta
	}
	err = db.Flush(ctx)
	background, own := checks.SplitFlushError(err)
	require.Len(t, background, checks.MaxLostNamed, "%v", err)
	assert.NoError(t, own, "nothing buffered since: the Flush's own part is empty")
	for i, e := range background {
		var fe *state.FlushError
		require.ErrorAs(t, e, &fe)
		assert.ErrorContains(t, fe.Dropped["b"], fmt.Sprintf("delta %d dropped", i+1), "in the order they ran")
	}
	assert.ErrorContains(t, err, "also, 2 more background flushes failed")
	assert.NoError(t, db.Flush(ctx), "each reported once")
}
