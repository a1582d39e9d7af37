package ratelimit_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/ratelimit"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlidingWindowCountSurvivesASweepAhead: a sliding window's count is
// read as the previous one all through the next window, and kept a window
// more, so that another process on the file whose engine time is ahead
// (here by half a window) does not sweep it while a process behind still
// weighs it. Its row lives two windows past its window's end from its
// creation, and no longer.
func TestSlidingWindowCountSurvivesASweepAhead(t *testing.T) {
	const w = time.Minute
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "rl.state")
	clock := faults.NewClock(t0)
	behind, err := state.Open(path, state.WithClock(clock), state.WithoutBackground())
	require.NoError(t, err)
	defer behind.Close()
	clock.StepWall(w / 2) // the second process's wall clock is half a window ahead
	ahead, err := state.Open(path, state.WithClock(clock), state.WithoutBackground())
	require.NoError(t, err)
	defer ahead.Close()
	require.Equal(t, w/2, ahead.Now().Sub(behind.Now()), "the test's premise: one engine time ahead")

	l, err := ratelimit.NewSlidingWindow(behind, 10, w, ratelimit.WithPrefix("s:"))
	require.NoError(t, err)
	check(t, decide(t, l, "k", 10), 10, want{true, 0, 66 * time.Second, 2 * w}, "the whole limit at the window's start")
	k := "s:k:" + fmt.Sprint(t0.UnixNano()/int64(w))
	left, err := behind.TTL(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, 3*w, left, "the rest of its window, the next one, and one more")

	// Halfway into the next window for the process behind, the one ahead
	// is at the end of it: the count must still be there to weigh 10*30/60.
	clock.Advance(w + w/2)
	_, err = ahead.Sweep(ctx)
	require.NoError(t, err)
	check(t, decide(t, l, "k", 6), 10, want{false, 5, 6 * time.Second, w / 2}, "5 weighed + 6 > 10, after the sweep ahead")
	check(t, decide(t, l, "k", 5), 10, want{true, 0, 6 * time.Second, 3 * w / 2}, "5 weighed + 5 fit")

	// Gone for every process at its deadline, and not before.
	clock.Advance(3*w/2 - time.Millisecond)
	_, err = behind.Get(ctx, k)
	require.NoError(t, err, "a millisecond before its deadline")
	clock.Advance(time.Millisecond)
	n, err := behind.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the first window's count is swept at its deadline, the second's lives on")
	_, err = behind.Get(ctx, k)
	assert.ErrorIs(t, err, state.ErrNotFound)
}
