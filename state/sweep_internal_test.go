package state

import (
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// txnSizes is a sweep observer that records the rows of each sweep
// transaction, and calls first, if set, at the start of the first.
type txnSizes struct {
	mu    sync.Mutex
	sizes []int
	first func()
}

func (o *txnSizes) Sweeping(int64, bool) func([]string, error) {
	o.mu.Lock()
	f := o.first
	o.first = nil
	o.mu.Unlock()
	if f != nil {
		f()
	}
	return func(keys []string, err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if err == nil {
			o.sizes = append(o.sizes, len(keys))
		}
	}
}

func (o *txnSizes) get() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.sizes...)
}

// tickingClock is a clock whose monotonic time moves by tick at every
// reading, so a sweep's steps take time without a real timer.
type tickingClock struct {
	*faults.Clock
	tick time.Duration
	n    atomic.Int64
}

func (c *tickingClock) Monotonic() time.Duration {
	return c.Clock.Monotonic() + time.Duration(c.n.Add(1))*c.tick
}

// sweepFixture opens a file without background work, with rows keys that
// expire, on clock, and moves the clock past their deadline.
func sweepFixture(t *testing.T, clock Clock, advance func(), rows int, o *txnSizes) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "s.state"), WithClock(clock), WithoutBackground(),
		hooks.Option(hooks.Engine{Sweeps: o}).(Option))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	// One statement, straight through SQL (the schema is documented):
	// thousands of Sets are slow under the race detector.
	deadline := db.Now().UnixMilli() + 1
	_, err = db.conn.ExecContext(t.Context(), `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?1)
INSERT INTO kv(key, value, expires_at) SELECT printf('k%06d', i), i, ?2 FROM c`, rows, deadline)
	require.NoError(t, err)
	advance()
	return db
}

// TestSweepYieldsToAQueuedVerb: a verb queued when a sweep transaction
// begins waits for one step and its COMMIT, not for the rest of the sweep:
// the transaction is that one step (run in autocommit), however many rows
// are left, and the verb runs next.
func TestSweepYieldsToAQueuedVerb(t *testing.T) {
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := &txnSizes{}
	db := sweepFixture(t, clock, func() { clock.Advance(time.Millisecond) }, 5000, o)
	var firstStep int
	incr := make(chan error, 1)
	o.first = func() {
		// mu is held: the sweep's first transaction is about to begin.
		firstStep = db.sweepLimit()
		go func() { _, err := db.Incr(context.Background(), "counter"); incr <- err }()
		for i := 0; !db.q.waiting(); i++ {
			require.Less(t, i, 1_000_000, "the Incr never queued")
			runtime.Gosched()
		}
	}
	n, err := db.Sweep(t.Context())
	require.NoError(t, err)
	require.NoError(t, <-incr)
	assert.Equal(t, 5000, n)
	sizes := o.get()
	require.NotEmpty(t, sizes)
	assert.Equal(t, firstStep, sizes[0], "the first transaction committed after its first step, with a verb queued")
	assert.Greater(t, len(sizes), 1)
}

// triggerClock is a clock that calls a function once, at its reading after
// next readings from when it is armed.
type triggerClock struct {
	*faults.Clock
	mu   sync.Mutex
	left int
	fn   func()
}

func (c *triggerClock) arm(next int, fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.left, c.fn = next, fn
}

func (c *triggerClock) Monotonic() time.Duration {
	c.mu.Lock()
	var fn func()
	if c.fn != nil {
		if c.left--; c.left == 0 {
			fn, c.fn = c.fn, nil
		}
	}
	c.mu.Unlock()
	if fn != nil {
		fn()
	}
	return c.Clock.Monotonic()
}

// TestSweepYieldsToAVerbQueuedMidStep: a verb that queues while a sweep
// transaction's step runs waits for that step and the COMMIT: the
// transaction ends after the step during which the verb queued, however
// many rows are left, and the verb runs next.
func TestSweepYieldsToAVerbQueuedMidStep(t *testing.T) {
	base := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	clock := &triggerClock{Clock: base}
	o := &txnSizes{}
	db := sweepFixture(t, clock, func() { base.Advance(time.Millisecond) }, 5000, o)
	var firstStep int
	incr := make(chan error, 1)
	o.first = func() {
		// mu is held, nobody is queued: the first transaction will BEGIN
		// and run steps. Its first step reads the clock before and after
		// its statement: at the second reading the Incr queues.
		require.False(t, db.q.waiting())
		firstStep = db.sweepLimit()
		clock.arm(2, func() {
			go func() { _, err := db.Incr(context.Background(), "counter"); incr <- err }()
			for i := 0; !db.q.waiting(); i++ {
				require.Less(t, i, 1_000_000, "the Incr never queued")
				runtime.Gosched()
			}
		})
	}
	n, err := db.Sweep(t.Context())
	require.NoError(t, err)
	require.NoError(t, <-incr)
	assert.Equal(t, 5000, n)
	sizes := o.get()
	require.NotEmpty(t, sizes)
	assert.Equal(t, firstStep, sizes[0], "the first transaction committed after the step during which the verb queued")
	assert.Greater(t, len(sizes), 1)
}

// TestSweepTransactionBounds: with nobody waiting, a sweep transaction goes
// on past one step, and ends at sweepTxnRows rows (on a clock that stands
// still, as a simulator's) or once its steps took sweepTxnTime by the
// clock, whichever comes first. On a clock that stands still the sizes are
// exact: the first transaction's steps grow from 32 rows to 1,024 and it
// ends at 17,376 rows, and the second's, all of 1,024 rows, end at 16,384
// exactly. The exact sizes failed with sweepTxnRows 16*1024+900 (a second
// transaction of 17,408, which the bounds alone let through: the first is
// 17,376 either way) and with sweepBatchRows 1023 (17,360 and 16,368).
func TestSweepTransactionBounds(t *testing.T) {
	const rows = sweepTxnRows + 3*sweepBatchRows
	t.Run("rows", func(t *testing.T) {
		const rows = 2*sweepTxnRows + 3*sweepBatchRows
		clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		o := &txnSizes{}
		db := sweepFixture(t, clock, func() { clock.Advance(time.Millisecond) }, rows, o)
		n, err := db.Sweep(t.Context())
		require.NoError(t, err)
		assert.Equal(t, rows, n)
		sizes := o.get()
		require.Len(t, sizes, 3)
		assert.GreaterOrEqual(t, sizes[0], sweepTxnRows)
		assert.Less(t, sizes[0], sweepTxnRows+sweepBatchRows, "at most one step past the bound")
		// The numbers the docs give: 16,384 rows, steps of at most 1,024.
		assert.GreaterOrEqual(t, sizes[0], 16384, "the documented bound")
		assert.Less(t, sizes[0], 16384+1024, "at most one documented step past it")
		// Exactly: quick steps double from the inline bound, 32, 64, 128,
		// 256 and 512 rows (992), then 1,024 each, until the transaction
		// reached 16,384 rows: 16 more steps. The next transaction's
		// steps are 1,024 rows from its first: 16 of them are 16,384.
		assert.Equal(t, 32+64+128+256+512+16*1024, sizes[0], "steps grow to 1,024 rows; the one that reaches 16,384 rows ends the transaction")
		assert.Equal(t, 16384, sizes[1], "16 steps of 1,024 rows reach 16,384 exactly")
		assert.Equal(t, rows-sizes[0]-sizes[1], sizes[2])
	})
	t.Run("time", func(t *testing.T) {
		base := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		// Each step reads the clock three times: a step of 60 µs by its
		// own two readings (its size stays), 180 µs in all, and about 12
		// steps to a transaction.
		clock := &tickingClock{Clock: base, tick: 60 * time.Microsecond}
		o := &txnSizes{}
		db := sweepFixture(t, clock, func() { base.Advance(time.Millisecond) }, rows, o)
		n, err := db.Sweep(t.Context())
		require.NoError(t, err)
		assert.Equal(t, rows, n)
		sizes := o.get()
		require.Greater(t, len(sizes), 2, "transactions end by time before their rows bound")
		steps := int(sweepTxnTime/(3*clock.tick)) + 1
		assert.Less(t, sizes[0], sweepTxnRows)
		assert.LessOrEqual(t, sizes[0], steps*inlineSweepRows)
		// The documented 2 ms: as many steps as 2 ms of the clock holds.
		assert.LessOrEqual(t, sizes[0], (int(2*time.Millisecond/(3*clock.tick))+1)*inlineSweepRows, "the documented 2 ms")
		assert.Greater(t, sizes[0], inlineSweepRows, "more than one step while nobody waits")
		// Exactly: steps of 180 µs, of a constant size, until they took
		// 2 ms: the twelfth reaches it.
		assert.Equal(t, 12*inlineSweepRows, sizes[0], "a transaction ends once its steps took 2 ms, not before")
	})
}

// TestSweepPause: the background sweeper comes back sooner after a pass
// that found a backlog.
func TestSweepPause(t *testing.T) {
	assert.Equal(t, time.Second, sweepPause(time.Second, 0))
	assert.Equal(t, time.Second, sweepPause(time.Second, sweepBusyRows-1))
	assert.Equal(t, 100*time.Millisecond, sweepPause(time.Second, sweepBusyRows))
	// The numbers the docs give: 256 rows or more, a tenth of the interval.
	assert.Equal(t, time.Second, sweepPause(time.Second, 255))
	assert.Equal(t, 100*time.Millisecond, sweepPause(time.Second, 256))
}

// TestSweepStepRowsBoundsTheStep: a sweep step starts at the inline
// bound and doubles after quick steps up to its bound, 1,024 rows by
// default and hooks.Engine.SweepStepRows when set (the simulator's few
// rows, so its sweeps take several steps); Sweep returns every row its
// steps deleted. The literal 1,024 failed with sweepBatchRows 1023, which
// the comparison with the constant let through.
func TestSweepStepRowsBoundsTheStep(t *testing.T) {
	o := &txnSizes{}
	db := sweepFixture(t, faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), func() {}, 1, o)
	assert.Equal(t, inlineSweepRows, db.sweepLimit())
	for range 10 {
		db.sweepTook(0)
	}
	assert.Equal(t, sweepBatchRows, db.sweepLimit(), "quick steps grow to the engine's bound")
	assert.Equal(t, 1024, db.sweepLimit(), "the documented 1,024 rows")

	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	db, err := Open(filepath.Join(t.TempDir(), "few.state"), WithClock(clock), WithoutBackground(),
		hooks.Option(hooks.Engine{Sweeps: o, SweepStepRows: 3}).(Option))
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	for i := range 10 {
		require.NoError(t, db.Set(ctx, string(rune('a'+i)), i, TTL(time.Millisecond)))
	}
	clock.Advance(time.Second)
	assert.Equal(t, 3, db.sweepLimit())
	n, err := db.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 10, n, "every step's rows counted")
	assert.Equal(t, 3, db.sweepLimit(), "quick steps grow no further than the hook's bound")
}

// TestSweepStepsAreSizedToAbout100Microseconds: a step that took more than
// 100 µs halves the next, one under 50 µs doubles it (up to the step's
// most rows), and one between keeps it, as the README says.
func TestSweepStepsAreSizedToAbout100Microseconds(t *testing.T) {
	db := &DB{cfg: config{sweepStepRows: 1024}}
	for _, c := range []struct {
		took       time.Duration
		rows, want int
	}{
		{101 * time.Microsecond, 64, 32},
		{100 * time.Microsecond, 64, 64},
		{50 * time.Microsecond, 64, 64},
		{49 * time.Microsecond, 64, 128},
		{49 * time.Microsecond, 1024, 1024},
		{time.Millisecond, 1, 1},
	} {
		db.sweepRows = c.rows
		db.sweepTook(c.took)
		assert.Equal(t, c.want, db.sweepRows, "a step of %d rows that took %v", c.rows, c.took)
	}
}
