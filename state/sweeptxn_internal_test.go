package state

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSweepTransactionWithAVerbQueuedIsOneAutocommitDelete: a sweep
// transaction that begins with a verb queued already runs its one step as
// a single DELETE in autocommit: no transaction is open on the connection
// before the DELETE (no BEGIN) nor after it (it committed by itself). It
// failed with the autocommit branch of sweepTxn turned off (`if false &&
// db.q.waiting()`: BEGIN, one step, COMMIT), which every other sweep test
// let through: the transaction is the same one step either way.
func TestSweepTransactionWithAVerbQueuedIsOneAutocommitDelete(t *testing.T) {
	base := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	clock := &triggerClock{Clock: base}
	o := &txnSizes{}
	db := sweepFixture(t, clock, func() { base.Advance(time.Millisecond) }, 5000, o)
	var firstStep int
	var before, after bool // the connection in autocommit around the first step's DELETE
	incr := make(chan error, 1)
	o.first = func() {
		// mu is held: the sweep's first transaction is about to begin.
		// Queue a verb, then look at the connection at the step's two
		// clock readings, before and after its DELETE.
		firstStep = db.sweepLimit()
		go func() { _, err := db.Incr(context.Background(), "counter"); incr <- err }()
		for i := 0; !db.q.waiting(); i++ {
			require.Less(t, i, 1_000_000, "the Incr never queued")
			runtime.Gosched()
		}
		clock.arm(1, func() {
			before = db.autocommit()
			clock.arm(1, func() { after = db.autocommit() })
		})
	}
	n, err := db.Sweep(t.Context())
	require.NoError(t, err)
	require.NoError(t, <-incr)
	assert.Equal(t, 5000, n)
	sizes := o.get()
	require.NotEmpty(t, sizes)
	assert.Equal(t, firstStep, sizes[0], "the transaction is its first step")
	assert.True(t, before, "no BEGIN before the DELETE of a transaction that began with a verb queued")
	assert.True(t, after, "the DELETE committed by itself: no transaction left open after it")
}

// TestSweepTransactionEndsOnceItsStepsTookExactly2ms: on a clock that
// makes every step take 80 µs (60 µs of statement, so its size stays, and
// 20 µs after it), a transaction ends after the step that brings its time
// to 2 ms exactly, the 25th (800 rows), and goes on past a step that
// brings it to 1 ns short of 2 ms (26 steps, 832 rows): the bound is 2 ms
// to the nanosecond. It failed with sweepTxnTime 2.15 ms (27 steps in the
// first case), which TestSweepTransactionBounds, whose steps take 180 µs,
// let through.
func TestSweepTransactionEndsOnceItsStepsTookExactly2ms(t *testing.T) {
	for _, c := range []struct {
		name  string
		short time.Duration // taken off the first step's time
		steps int
	}{
		{"at-2ms", 0, 25},
		{"1ns-short-of-2ms", time.Nanosecond, 26},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			clock := &triggerClock{Clock: base}
			o := &txnSizes{}
			db := sweepFixture(t, clock, func() { base.Advance(time.Millisecond) }, 2000, o)
			o.first = func() {
				// The transaction read its start: each step reads the
				// clock before its statement, after it, and after the
				// step (sweepSteps); advance it at those readings, for
				// the first 30 steps.
				require.Equal(t, inlineSweepRows, db.sweepLimit())
				adds := []time.Duration{0, 60 * time.Microsecond, 20*time.Microsecond - c.short}
				for range 29 {
					adds = append(adds, 0, 60*time.Microsecond, 20*time.Microsecond)
				}
				var next func()
				next = func() {
					base.Advance(adds[0])
					if adds = adds[1:]; len(adds) > 0 {
						clock.arm(1, next)
					}
				}
				clock.arm(1, next)
			}
			n, err := db.Sweep(t.Context())
			require.NoError(t, err)
			assert.Equal(t, 2000, n)
			sizes := o.get()
			require.NotEmpty(t, sizes)
			assert.Equal(t, c.steps*inlineSweepRows, sizes[0], "steps of 80 µs until they took 2 ms")
		})
	}
}

// TestSweepStepsHalveAfterASlowYieldedCommit: a transaction that ended
// because a verb queued during its step, and whose COMMIT then took more
// than a step should (100 µs) by the clock, halves the next step: the
// first step (32 rows, quick on a clock that stands still, so the next
// would be 64) is followed by one of 32 after a COMMIT of 101 µs, and of
// 64 after one of 100 µs. It failed (64 after the slow COMMIT) with the
// halving after the COMMIT in sweepTxn taken out.
func TestSweepStepsHalveAfterASlowYieldedCommit(t *testing.T) {
	for _, c := range []struct {
		commit time.Duration
		next   int
	}{
		{101 * time.Microsecond, inlineSweepRows},
		{100 * time.Microsecond, 2 * inlineSweepRows},
	} {
		t.Run(c.commit.String(), func(t *testing.T) {
			base := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			clock := &triggerClock{Clock: base}
			o := &txnSizes{}
			db := sweepFixture(t, clock, func() { base.Advance(time.Millisecond) }, 5000, o)
			next := -1 // the step size the second transaction begins with
			incr := make(chan error, 1)
			o.first = func() {
				// mu is held, nobody is queued: the transaction BEGINs.
				// Its first step reads the clock before and after its
				// statement: at the second reading the Incr queues. The
				// step then reads it once more, and after the COMMIT
				// once: that reading finds c.commit gone by.
				require.False(t, db.q.waiting())
				require.Equal(t, inlineSweepRows, db.sweepLimit())
				clock.arm(2, func() {
					go func() { _, err := db.Incr(context.Background(), "counter"); incr <- err }()
					for i := 0; !db.q.waiting(); i++ {
						require.Less(t, i, 1_000_000, "the Incr never queued")
						runtime.Gosched()
					}
					clock.arm(2, func() {
						base.Advance(c.commit)
						o.mu.Lock()
						o.first = func() { next = db.sweepLimit() }
						o.mu.Unlock()
					})
				})
			}
			n, err := db.Sweep(t.Context())
			require.NoError(t, err)
			require.NoError(t, <-incr)
			assert.Equal(t, 5000, n)
			sizes := o.get()
			require.Greater(t, len(sizes), 1)
			assert.Equal(t, inlineSweepRows, sizes[0], "the first transaction yielded after its first step")
			assert.Equal(t, c.next, next, "the step after a yielded COMMIT of %v", c.commit)
		})
	}
}
