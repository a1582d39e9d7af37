package state

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gateClock is a simulated clock that is a Sleeper: a pause of a tenth of
// a second or more (the background sweeper's) waits for a send on gate or
// for the handle to stop; a shorter one (a busy handler's) passes at once.
type gateClock struct {
	*faults.Clock
	gate chan struct{}
}

func (c *gateClock) Sleep(d time.Duration, stop <-chan struct{}) bool {
	if d >= 100*time.Millisecond {
		select {
		case <-c.gate:
		case <-stop:
			return false
		}
	}
	c.Advance(d)
	return true
}

// sweepTxns is a sweep observer that counts sweep transactions and holds
// the end of the first until resume is closed, after sending on first.
type sweepTxns struct {
	mu     sync.Mutex
	n      int
	first  chan struct{}
	resume chan struct{}
}

func (o *sweepTxns) Sweeping(int64, bool) func([]string, error) {
	o.mu.Lock()
	o.n++
	n := o.n
	o.mu.Unlock()
	return func([]string, error) {
		if n == 1 {
			o.first <- struct{}{}
			<-o.resume
		}
	}
}

func (o *sweepTxns) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// TestCloseStopsTheBackgroundSweepAfterItsTransaction: Close, called while
// the background sweeper deletes a backlog of several transactions, waits
// for the transaction in flight and no more: the sweeper begins no other
// once Close began, and the rest is left for later, as expired keys are
// (absent to every verb already). Before, Close waited until the sweeper
// had deleted the whole backlog: 4.7 s for two million expired keys.
func TestCloseStopsTheBackgroundSweepAfterItsTransaction(t *testing.T) {
	ctx := context.Background()
	m := faults.NewMemFS(1)
	clock := &gateClock{Clock: faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), gate: make(chan struct{})}
	obs := &sweepTxns{first: make(chan struct{}), resume: make(chan struct{})}
	db, err := Open("/sim/backlog.state", WithFS(m.Process(1)), WithClock(clock), WithFlushInterval(0),
		func(c *config) { c.sweeps = obs })
	require.NoError(t, err)
	const keys = sweepTxnRows + 2*sweepBatchRows // two transactions on a clock that stands still
	require.NoError(t, db.Update(ctx, func(tx *Tx) error {
		for i := range keys {
			if err := tx.Set(fmt.Sprintf("k%06d", i), i, TTL(time.Millisecond)); err != nil {
				return err
			}
		}
		return nil
	}))
	clock.Advance(time.Second)

	clock.gate <- struct{}{} // the sweeper's first pass
	<-obs.first              // its first transaction is done, holding the handle's lock
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	for !db.bg.stopped.Load() {
		runtime.Gosched()
	}
	close(obs.resume)
	require.NoError(t, <-closed)
	assert.Equal(t, 1, obs.count(), "the sweeper began another transaction after Close began")

	db, err = Open("/sim/backlog.state", WithFS(m.Process(1)), WithClock(clock), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	st, err := db.Stats(ctx)
	require.NoError(t, err)
	assert.Greater(t, st.ExpiredKeys, int64(0), "the backlog was swept whole before Close returned")
	n, err := db.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, st.ExpiredKeys, int64(n), "the next sweep deletes what was left")
}

// TestCloseStopsASweepBatchQueuedBeforeIt: a sweep batch that queued for
// the handle's lock before Close began, and gets the lock only after,
// begins no transaction. Before, it swept a whole transaction more.
func TestCloseStopsASweepBatchQueuedBeforeIt(t *testing.T) {
	ctx := context.Background()
	m := faults.NewMemFS(1)
	clock := &gateClock{Clock: faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), gate: make(chan struct{})}
	// A transaction, if one begins, goes on at once.
	obs := &sweepTxns{first: make(chan struct{}, 1), resume: make(chan struct{})}
	close(obs.resume)
	db, err := Open("/sim/queued.state", WithFS(m.Process(1)), WithClock(clock), WithFlushInterval(0),
		func(c *config) { c.sweeps = obs })
	require.NoError(t, err)
	require.NoError(t, db.Update(ctx, func(tx *Tx) error {
		for i := range 100 {
			if err := tx.Set(fmt.Sprintf("k%03d", i), i, TTL(time.Millisecond)); err != nil {
				return err
			}
		}
		return nil
	}))
	clock.Advance(time.Second)

	inside, release, updated := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		updated <- db.Update(ctx, func(*Tx) error { close(inside); <-release; return nil })
	}()
	<-inside                 // the Update holds the handle's lock
	clock.gate <- struct{}{} // the sweeper's first pass
	for !db.q.waiting() {    // its batch queues behind the Update
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	for !db.bg.stopped.Load() {
		runtime.Gosched()
	}
	close(release)
	require.NoError(t, <-updated)
	require.NoError(t, <-closed)
	assert.Zero(t, obs.count(), "the sweeper began a transaction after Close began")
}
