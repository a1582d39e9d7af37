package redisstate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A background flush whose answer is lost (the server paused past the
// read timeout) gives its deltas up, since sending them again could count
// them twice, and its error reaches the program: the next Flush returns
// ErrOutcomeUnknown naming the key and delta, once. The server is resumed
// only once background flushes have given up all ten increments (told by a
// flush observer), not after a fixed pause.
func TestBackgroundFlushLostAnswerIsReported(t *testing.T) {
	srv := redistest.Start(t)
	obs := &lostFlushes{gaveUp: make(chan int64, 16)}
	db, err := state.Open(srv.URL("t:")+"&read_timeout=300ms", hooks.Option(hooks.Engine{Flushes: obs}).(state.Option))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "warm", 1)) // a connection in the pool
	srv.Pause()
	for range 10 {
		require.NoError(t, db.IncrBuffered("hits", 1))
	}
	var lost []int64 // each lost flush's "hits" delta: ten calls may fall into two flushes
	for sum := int64(0); sum < 10; {
		select {
		case n := <-obs.gaveUp:
			lost = append(lost, n)
			sum += n
		case <-ctx.Done():
			t.Fatalf("background flushes gave up %v of the 10 increments before the test's deadline", lost)
		}
	}
	srv.Resume()
	err = db.Flush(ctx) // waits for the background flush to keep its error
	require.ErrorIs(t, err, state.ErrOutcomeUnknown, "the background flush's lost answer")
	assert.ErrorIs(t, err, state.ErrBackgroundFlush, "marked as an earlier background flush's")
	for _, n := range lost {
		assert.Contains(t, err.Error(), fmt.Sprintf(`"hits" +%d`, n))
	}
	assert.Contains(t, err.Error(), "background flush")
	require.NoError(t, db.Flush(ctx), "reported once")
	require.NoError(t, db.Close())
}

// lostFlushes is a flush observer that sends the "hits" delta of each
// flush that ended with an error and did not put its deltas back.
type lostFlushes struct{ gaveUp chan int64 }

// Flushing reports the flush's "hits" delta when it gives it up.
func (o *lostFlushes) Flushing(d map[string]int64) (func(int64), func(int64, error, bool)) {
	return nil, func(_ int64, err error, restored bool) {
		if err != nil && !restored && d["hits"] != 0 {
			o.gaveUp <- d["hits"]
		}
	}
}

// Flush waits for a background flush in flight: with the server down,
// the background flush holds the deltas while go-redis dials; a Flush
// right after the server comes back must not return nil before they are
// written.
func TestFlushAfterOutageSeesItsIncrements(t *testing.T) {
	srv := redistest.Start(t)
	db := openURL(t, srv.URL("t:"))
	ctx := ctxT(t)
	for i := range 3 {
		key := fmt.Sprintf("buf%d", i)
		srv.Kill()
		require.NoError(t, db.IncrBuffered(key, 5))
		time.Sleep(time.Second)
		srv.Restart()
		if err := db.Flush(ctx); err != nil {
			// A Flush that found the server still coming up says so
			// and keeps the delta; the next one writes it.
			require.ErrorIs(t, err, state.ErrUnavailable)
			require.NoError(t, db.Flush(ctx))
		}
		v, err := db.Get(ctx, key)
		require.NoError(t, err, "run %d: Flush returned nil before the delta was written", i)
		assert.Equal(t, "5", v.String())
	}
}

// Close on a paused server says the buffered increments may or may not
// have been written, not that they were not.
func TestCloseLostAnswerSaysMaybe(t *testing.T) {
	srv := redistest.Start(t)
	db, err := state.Open(srv.URL("t:")+"&read_timeout=300ms", state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Set(ctxT(t), "warm", 1))
	srv.Pause()
	defer srv.Resume()
	require.NoError(t, db.IncrBuffered("b", 1))
	err = db.Close()
	require.ErrorIs(t, err, state.ErrOutcomeUnknown)
	assert.Contains(t, err.Error(), `may or may not have been written ("b" +1)`)
	assert.NotContains(t, err.Error(), "not written (")
}
