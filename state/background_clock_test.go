package state_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldSleeper is a clock whose background waits the test decides: each
// Sleep of a tenth of a second or more sends what it was asked for and
// waits until the test lets it go (advancing the clock by it) or the
// handle stops. A shorter one (a busy handler's pause) passes at once.
type heldSleeper struct {
	*faults.Clock
	asked chan heldSleep
}

type heldSleep struct {
	d    time.Duration
	done chan struct{}
}

func (s *heldSleeper) Sleep(d time.Duration, stop <-chan struct{}) bool {
	if d < 100*time.Millisecond {
		s.Advance(d)
		return true
	}
	h := heldSleep{d: d, done: make(chan struct{})}
	select {
	case s.asked <- h:
	case <-stop:
		return false
	}
	select {
	case <-h.done:
		s.Advance(d)
		return true
	case <-stop:
		return false
	}
}

// next returns the next wait of d the background goroutines ask for,
// leaving the others asked meanwhile in held.
func (s *heldSleeper) next(t *testing.T, d time.Duration, held map[time.Duration][]heldSleep) heldSleep {
	t.Helper()
	if hs := held[d]; len(hs) > 0 {
		held[d] = hs[1:]
		return hs[0]
	}
	for {
		select {
		case h := <-s.asked:
			if h.d == d {
				return h
			}
			held[h.d] = append(held[h.d], h)
		case <-time.After(20 * time.Second):
			t.Fatalf("no wait of %v asked of the clock; others asked: %v", d, held)
		}
	}
}

// The background sweeper and flusher wait through the injected clock when
// it is a Sleeper, for the default intervals (1 s and 250 ms): nothing is
// swept or flushed until the clock lets a wait go. After a pass that
// deleted 256 rows or more the sweeper comes back after a tenth of its
// interval, then after the whole interval again.
func TestBackgroundWaitsThroughTheClockForTheDefaultIntervals(t *testing.T) {
	clock := &heldSleeper{Clock: newClock(), asked: make(chan heldSleep)}
	db, err := state.Open(filepath.Join(t.TempDir(), "bg.state"), state.WithClock(clock))
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	held := map[time.Duration][]heldSleep{}

	sweep := clock.next(t, state.DefaultSweepInterval, held)
	flush := clock.next(t, state.DefaultFlushInterval, held)
	require.Equal(t, time.Second, state.DefaultSweepInterval)
	require.Equal(t, 250*time.Millisecond, state.DefaultFlushInterval)

	require.NoError(t, db.Update(ctx, func(tx *state.Tx) error {
		for i := range 1000 {
			if err := tx.Set(fmt.Sprintf("k%04d", i), i, state.TTL(time.Millisecond)); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.IncrBuffered("n", 3))
	clock.Advance(time.Millisecond)
	st, err := db.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1000), st.Keys+st.ExpiredKeys, "nothing swept before the sweeper's wait ended")
	_, err = db.Get(ctx, "n")
	require.ErrorIs(t, err, state.ErrNotFound, "nothing flushed before the flusher's wait ended")

	close(flush.done)
	clock.next(t, state.DefaultFlushInterval, held) // the flush ran
	v, err := db.Get(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, "3", v.String())

	close(sweep.done)
	sweep = clock.next(t, state.DefaultSweepInterval/10, held) // a backlog: back sooner
	st, err = db.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Keys+st.ExpiredKeys, "the sweeper's pass deleted every expired row, and left n")
	close(sweep.done)
	clock.next(t, state.DefaultSweepInterval, held) // nothing left: the whole interval
}

// TestBackgroundSweeperComesBackSoonerAfterAPassOf256Rows: the background
// sweeper's own pause after a pass is the whole interval after one that
// deleted 255 rows, and a tenth of it after one that deleted 256. It
// failed (a tenth after 255) with the sweeper asking sweepPause(d, n+1),
// which TestSweepPause, calling sweepPause itself, let through.
func TestBackgroundSweeperComesBackSoonerAfterAPassOf256Rows(t *testing.T) {
	clock := &heldSleeper{Clock: newClock(), asked: make(chan heldSleep)}
	// No flusher: every wait asked of the clock is the sweeper's.
	db, err := state.Open(filepath.Join(t.TempDir(), "bg.state"), state.WithClock(clock), state.WithFlushInterval(0))
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	held := map[time.Duration][]heldSleep{}
	sweep := clock.next(t, time.Second, held)
	for _, c := range []struct {
		rows int
		next time.Duration
	}{
		{255, time.Second},
		{256, 100 * time.Millisecond},
		{0, time.Second},
	} {
		require.NoError(t, db.Update(ctx, func(tx *state.Tx) error {
			for i := range c.rows {
				if err := tx.Set(fmt.Sprintf("k%d/%04d", c.rows, i), i, state.TTL(time.Millisecond)); err != nil {
					return err
				}
			}
			return nil
		}))
		clock.Advance(time.Millisecond)
		close(sweep.done)
		select {
		case sweep = <-clock.asked:
		case <-time.After(20 * time.Second):
			t.Fatalf("the sweeper asked no wait after its pass of %d rows", c.rows)
		}
		assert.Equal(t, c.next, sweep.d, "the sweeper's wait after a pass that deleted %d rows", c.rows)
		st, err := db.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(0), st.ExpiredKeys, "the pass deleted every expired row")
	}
}
