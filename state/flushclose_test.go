package state_test

import (
	"context"
	"testing"
	"time"

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
