package state

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBusyHandlerIsInstalled: the engine's busy handler replaces SQLite's
// on the handle's connection, on the native VFS and through WithFS. It
// needs the SQLite handle modernc.org/sqlite keeps: a driver version
// without it fails here, not silently in production.
func TestBusyHandlerIsInstalled(t *testing.T) {
	native, err := Open(filepath.Join(t.TempDir(), "b.state"), WithoutBackground())
	require.NoError(t, err)
	defer native.Close()
	assert.NotZero(t, native.busyID)
	memfs, err := Open("b.state", WithFS(faults.NewMemFS(1).Process(1)), WithoutBackground())
	require.NoError(t, err)
	defer memfs.Close()
	assert.NotZero(t, memfs.busyID)
	id := native.busyID
	_, ok := busyHandles.Load(id)
	assert.True(t, ok)
	require.NoError(t, native.Close())
	_, ok = busyHandles.Load(id)
	assert.False(t, ok, "Close forgets the handle")
}

// lateClock is a clock that says it is the machine's own (Real) and whose
// timer wakes late: each pause asked for takes lateBy times as long, as on
// a loaded machine.
type lateClock struct {
	*faults.Clock
	lateBy time.Duration
}

func (c *lateClock) Real() bool { return true }

func (c *lateClock) Sleep(d time.Duration, _ <-chan struct{}) bool {
	c.Advance(d * c.lateBy)
	return true
}

// TestBusyGraceCountsWhatItSlept: a verb queued behind others, whose budget
// went by before its statements ran, retries for a grace of at most a
// tenth of its busy timeout, measured on the clock: on a loaded machine,
// where each millisecond pause takes 20 ms, its retries end within that
// grace and one late pause. Before, the grace counted the milliseconds it
// asked for: 100 pauses of 20 ms, 2 s past a 1 s budget (a 4 s timeout
// took 9.6 s in TestBusyTimeoutBoundsTheWholeVerb on a loaded machine).
// A verb queued past its whole budget still has its grace.
func TestBusyGraceCountsWhatItSlept(t *testing.T) {
	for _, waited := range []time.Duration{900 * time.Millisecond, 1500 * time.Millisecond} {
		clock := &lateClock{Clock: faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), lateBy: 20}
		db := &DB{cfg: config{clock: clock, busyTimeout: time.Second}}
		db.setWait(context.Background(), waited) // queued that long for the handle
		start := clock.Monotonic()
		retries := 0
		for db.busyRetry(busyDelays, retries) {
			retries++
			require.Less(t, retries, 1_000_000, "the busy handler never gave up")
		}
		took := clock.Monotonic() - start
		assert.LessOrEqual(t, waited+took, max(waited, time.Second)+busyGrace(time.Second)+20*time.Millisecond,
			"queued %v: the whole verb within its budget, the grace and one late pause", waited)
		assert.GreaterOrEqual(t, took, time.Duration(busyGrace(time.Second)), "queued %v: the grace is spent, on the clock", waited)
	}
}
