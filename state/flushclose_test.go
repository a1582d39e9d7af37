package state_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFlushCancelledWhileCloseWaitsLosesNothing: a Flush takes the buffer
// and waits for the handle's lock (an Update holds it); Close comes next;
// then the Flush's context ends. Its increments must be written by Close,
// or named in Close's error: before, the Flush put them back into a buffer
// Close had already emptied, and Close returned nil with them lost. The
// pauses only order the calls; if the machine reorders them, the test
// checks the same promise on an easier path.
func TestFlushCancelledWhileCloseWaitsLosesNothing(t *testing.T) {
	path := t.TempDir() + "/x.state"
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	ctx := context.Background()
	hold, inside, updated := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		updated <- db.Update(ctx, func(*state.Tx) error { close(inside); <-hold; return nil })
	}()
	<-inside
	require.NoError(t, db.IncrBuffered("hits", 5))
	fctx, cancel := context.WithCancel(ctx)
	flushed, closed := make(chan error, 1), make(chan error, 1)
	go func() { flushed <- db.Flush(fctx) }()
	time.Sleep(50 * time.Millisecond)
	go func() { closed <- db.Close() }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	flushErr := <-flushed
	close(hold)
	require.NoError(t, <-updated)
	closeErr := <-closed

	again, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	defer again.Close()
	v, err := again.Get(ctx, "hits")
	if err != nil {
		require.ErrorIs(t, err, state.ErrNotFound)
		assert.ErrorContains(t, closeErr, `"hits"`, "+5 not written, so Close must name it (Flush said: %v)", flushErr)
		return
	}
	assert.Equal(t, state.IntValue(5), v, "written once")
}

// heldFlush is a flush observer that holds the first flush, after it took
// the deltas and before it writes them, until release is closed, and
// records when that flush has ended.
type heldFlush struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
	ended   atomic.Bool
}

// Flushing holds the first flush and marks its end.
func (o *heldFlush) Flushing(map[string]int64) (func(int64), func(int64, error, bool)) {
	first := false
	o.once.Do(func() {
		first = true
		close(o.entered)
		<-o.release
	})
	if !first {
		return nil, nil
	}
	return nil, func(int64, error, bool) { o.ended.Store(true) }
}

// TestCloseTwiceAtOnceWaitsForTheFirstFlush: a second Close called while
// the first is still flushing returns ErrClosed only once the first has
// written the buffer (it waits for the flush's turn), so a program whose
// main goroutine's deferred Close returns, and exits, does not cut off the
// flush of a Close a signal handler began. The pause only orders the
// calls; if the machine delays the second Close, the test checks the same
// promise on an easier path.
func TestCloseTwiceAtOnceWaitsForTheFirstFlush(t *testing.T) {
	path := t.TempDir() + "/x.state"
	obs := &heldFlush{entered: make(chan struct{}), release: make(chan struct{})}
	db, err := state.Open(path, state.WithoutBackground(), hooks.Option(hooks.Engine{Flushes: obs}).(state.Option))
	require.NoError(t, err)
	require.NoError(t, db.IncrBuffered("n", 5))
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- db.Close() }()
	<-obs.entered // the first Close took the buffer
	go func() { second <- db.Close() }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-second:
		require.ErrorIs(t, err, state.ErrClosed)
		require.True(t, obs.ended.Load(), "the second Close returned while the first had not written the buffer")
	default:
		close(obs.release)
		require.ErrorIs(t, <-second, state.ErrClosed)
		require.True(t, obs.ended.Load(), "the second Close returned while the first had not written the buffer")
	}
	require.NoError(t, <-first)
	again, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	defer again.Close()
	v, err := again.Get(context.Background(), "n")
	require.NoError(t, err)
	assert.Equal(t, state.IntValue(5), v)
}

// TestCloseTwiceAtOnceWaitsForTheFirstToClose: two Closes called while
// the handle's lock is held (an Update in flight): neither returns while
// the Update holds it, and the one that returns ErrClosed does so only
// once the other has checkpointed and closed the file (the WAL is gone),
// so a program that exits as soon as either returns leaves no WAL behind.
// (Without the wait, the second Close returned ErrClosed at once.)
func TestCloseTwiceAtOnceWaitsForTheFirstToClose(t *testing.T) {
	path := t.TempDir() + "/x.state"
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	inside, release := make(chan struct{}), make(chan struct{})
	updated := make(chan error, 1)
	go func() {
		updated <- db.Update(context.Background(), func(tx *state.Tx) error {
			close(inside)
			<-release
			return tx.Set("k", state.IntValue(1))
		})
	}()
	<-inside
	type answer struct {
		err error
		wal bool // the WAL was there when this Close returned
	}
	closes := make(chan answer, 2)
	for range 2 {
		go func() {
			err := db.Close()
			_, statErr := os.Stat(path + "-wal")
			closes <- answer{err, statErr == nil}
		}()
	}
	time.Sleep(50 * time.Millisecond) // both Closes reach the handle
	select {
	case a := <-closes:
		t.Fatalf("a Close returned (%v) while the Update held the handle", a.err)
	default:
	}
	close(release)
	a, b := <-closes, <-closes
	if a.err != nil {
		a, b = b, a
	}
	require.NoError(t, a.err, "one Close closed the file")
	require.ErrorIs(t, b.err, state.ErrClosed, "the other")
	assert.False(t, a.wal, "the first Close checkpointed and removed the WAL")
	assert.False(t, b.wal, "the WAL was gone when the second Close returned")
	require.NoError(t, <-updated)
}

// TestIncrBufferedWhileClosingCountsExactly: goroutines buffer increments
// and call Flush while the background flusher runs and several Closes
// race; every IncrBuffered that returned nil is in the file once, and
// every other one returned ErrClosed.
func TestIncrBufferedWhileClosingCountsExactly(t *testing.T) {
	for round := range 5 {
		path := fmt.Sprintf("%s/c%d.state", t.TempDir(), round)
		db, err := state.Open(path, state.WithFlushInterval(time.Millisecond))
		require.NoError(t, err)
		var acked atomic.Int64
		var wg sync.WaitGroup
		busy := make(chan struct{}) // the Closes begin once work is under way
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 2000 {
					if err := db.IncrBuffered("n", 1); err != nil {
						assert.ErrorIs(t, err, state.ErrClosed)
						return
					}
					acked.Add(1)
					if g == 0 && i == 500 {
						close(busy)
					}
					if i%300 == g {
						if err := db.Flush(context.Background()); err != nil {
							assert.ErrorIs(t, err, state.ErrClosed)
						}
					}
				}
			}()
		}
		<-busy
		closed := make(chan error, 3)
		for range 3 {
			go func() { closed <- db.Close() }()
		}
		nils := 0
		for range 3 {
			if err := <-closed; err == nil {
				nils++
			} else {
				assert.ErrorIs(t, err, state.ErrClosed)
			}
		}
		assert.Equal(t, 1, nils, "one Close closes")
		wg.Wait()
		again, err := state.Open(path, state.WithoutBackground())
		require.NoError(t, err)
		v, err := again.Get(context.Background(), "n")
		if assert.NoError(t, err) {
			assert.Equal(t, state.IntValue(acked.Load()), v)
		}
		require.NoError(t, again.Close())
	}
}

// TestFlushWaitingBehindAFlushNamesIt: a Flush whose context ends while
// another caller's Flush holds the buffer's turn says it waited for a flush
// in flight; before, it named a background flush, on a handle that has
// none.
func TestFlushWaitingBehindAFlushNamesIt(t *testing.T) {
	obs := &heldFlush{entered: make(chan struct{}), release: make(chan struct{})}
	db, err := state.Open(t.TempDir()+"/x.state", state.WithoutBackground(), hooks.Option(hooks.Engine{Flushes: obs}).(state.Option))
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.IncrBuffered("n", 1))
	first := make(chan error, 1)
	go func() { first <- db.Flush(context.Background()) }()
	<-obs.entered // the first Flush holds the turn
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Done before the call: refused at once, without waiting for the turn.
	err = db.Flush(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotContains(t, err.Error(), "waiting")
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = db.Flush(ctx)
	close(obs.release)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "(waiting for another flush in flight)")
	assert.NotContains(t, err.Error(), "background")
	require.NoError(t, <-first)
}

// TestFlushWithADoneContextLeavesABackgroundFlushError: a Flush whose
// context is done before the call returns the context's error and takes
// nothing: the error a background flush kept (a dropped delta) is still
// Close's to report. Before, the Flush went ahead, returned that error in
// place of its context's, and Close said nothing.
func TestFlushWithADoneContextLeavesABackgroundFlushError(t *testing.T) {
	ctx := context.Background()
	db, err := state.Open(t.TempDir()+"/x.state", state.WithFlushInterval(5*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, db.Set(ctx, "b", "bytes"))
	require.NoError(t, db.IncrBuffered("b", 1)) // a background flush drops it, keeping the error
	require.NoError(t, db.IncrBuffered("n", 2))
	for deadline := time.Now().Add(time.Minute); ; {
		if v, err := db.Get(ctx, "n"); err == nil && v.String() == "2" {
			break // that background flush ran
		}
		require.True(t, time.Now().Before(deadline), "no background flush in a minute")
		time.Sleep(5 * time.Millisecond)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	err = db.Flush(done)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, state.ErrBackgroundFlush)
	closeErr := db.Close()
	assert.ErrorIs(t, closeErr, state.ErrBackgroundFlush, "Close reports what the background flush dropped")
	assert.ErrorContains(t, closeErr, `"b"`)
}
