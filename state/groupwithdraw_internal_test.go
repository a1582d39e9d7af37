package state

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVerbsCancelledInTheQueueDoNothing: verbs queued behind a held handle
// whose contexts end leave the queue unrun, get their context's error, and
// count nothing; the verbs queued beside them run once the handle is free,
// and are all that counted. The handle is held by the test, so every
// cancellation lands while its verb waits in the queue, which a run of
// goroutines with short deadlines reaches only by chance.
func TestVerbsCancelledInTheQueueDoNothing(t *testing.T) {
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	db, err := Open(filepath.Join(t.TempDir(), "queue.state"), WithClock(clock), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()

	const n = 16
	type answer struct {
		i   int
		got int64
		err error
	}
	answers := make(chan answer, n)
	cancels := make([]context.CancelFunc, n)
	db.mu.Lock() // the handle is busy: every Incr queues
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		go func() {
			got, err := db.Incr(ctx, "hot")
			answers <- answer{i, got, err}
		}()
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	queued := func() int {
		db.q.mu.Lock()
		defer db.q.mu.Unlock()
		return len(db.q.ops)
	}
	for deadline := time.Now().Add(time.Minute); queued() < n; {
		require.True(t, time.Now().Before(deadline), "%d of %d verbs queued in a minute", queued(), n)
		time.Sleep(time.Millisecond)
	}
	for i := 0; i < n; i += 2 {
		cancels[i]()
	}
	for range n / 2 {
		a := <-answers
		require.Equal(t, 0, a.i%2, "verb %d answered while the handle was held: %d, %v", a.i, a.got, a.err)
		assert.ErrorIs(t, a.err, context.Canceled, "verb %d", a.i)
		assert.Zero(t, a.got, "verb %d", a.i)
	}
	assert.Equal(t, n/2, queued(), "the cancelled verbs left the queue")
	db.unlock()

	var counts []int64
	for range n / 2 {
		a := <-answers
		require.Equal(t, 1, a.i%2, "verb %d was cancelled, and answered only now", a.i)
		require.NoError(t, a.err, "verb %d", a.i)
		counts = append(counts, a.got)
	}
	slices.Sort(counts)
	assert.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8}, counts, "each verb left in the queue counted once")
	v, err := db.Get(context.Background(), "hot")
	require.NoError(t, err)
	assert.Equal(t, "8", v.String(), "no cancelled verb counted")
}
