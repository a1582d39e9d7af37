package sim

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
)

// Each check must be able to fail: these tests feed it what it must reject.
// (The canaries in sim_test.go show the same against the engine.)

// quietWorld returns a world of cfg's seed with nothing started.
func quietWorld(t *testing.T) *world {
	t.Helper()
	cfg := DefaultConfig(1)
	return newWorld(cfg)
}

func failed(w *world) []string {
	var out []string
	for _, v := range w.violations {
		if !slices.Contains(out, v.Check) {
			out = append(out, v.Check)
		}
	}
	return out
}

func grantOp(owner string, token, call int64) linearizability.Op {
	return linearizability.Op{Client: 1, Call: call, Return: call + 1, Durability: linearizability.Full,
		Input:  model.Input{Kind: model.Lease, Key: "L0", Owner: owner, TTLMillis: 100, NowMillis: call},
		Output: model.Output{Token: token, ExpiresAt: call + 100}}
}

func TestFencingCheckRejectsATokenGrantedTwice(t *testing.T) {
	w := quietWorld(t)
	w.history = []linearizability.Op{grantOp("a", 1, 1), grantOp("b", 1, 10)}
	w.checkFencing()
	assert.Equal(t, []string{CheckFencing}, failed(w))
}

func TestFencingCheckRejectsATokenGoingBack(t *testing.T) {
	w := quietWorld(t)
	w.history = []linearizability.Op{grantOp("a", 3, 1), grantOp("b", 2, 10)}
	w.checkFencing()
	assert.Equal(t, []string{CheckFencing}, failed(w))
}

func TestFencingCheckAcceptsGrantsInOrderAndExtensions(t *testing.T) {
	w := quietWorld(t)
	w.history = []linearizability.Op{grantOp("a", 1, 1), grantOp("a", 1, 5), grantOp("b", 2, 10)}
	w.offer(0, "a", 1)
	w.offer(0, "b", 2)
	assert.False(t, w.offer(0, "a", 1), "a stale token must be rejected")
	w.checkFencing()
	assert.Empty(t, w.violations)
}

func TestFencingCheckRejectsOneTokenFromTwoWriters(t *testing.T) {
	w := quietWorld(t)
	w.offer(1, "a", 4)
	w.offer(1, "b", 4)
	w.checkFencing()
	assert.Equal(t, []string{CheckFencing}, failed(w))
}

// readClock returns a process clock that the engine read now, as it does
// at open.
func (w *world) readClock() *procClock {
	c := &procClock{w: w, startTrue: w.trueMillis}
	c.Wall()
	return c
}

func TestClockCheckRejectsTimeGoingBackAcrossARestart(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	w.clock.done(w.wallMillis()+5_000, 1, 2, false) // a call used a time ahead of the wall
	clock := w.readClock()
	w.clock.opened(w, p, w.wallMillis(), clock, w.clock.completed) // a new process starts at the wall
	assert.Equal(t, []string{CheckClock}, failed(w))
}

func TestClockCheckForgetsWhatAPowerLossTookBack(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	wall := w.wallMillis()
	w.clock.done(wall+1_000, 1, 2, true)  // durable
	w.clock.done(wall+5_000, 3, 4, false) // not durable: a power loss may take its mark
	w.clock.attempted = wall + 5_000
	w.clock.powerLost()
	clock := w.readClock()
	w.clock.opened(w, p, wall+1_000, clock, w.clock.completed)
	assert.Empty(t, w.violations)
	w.clock.opened(w, p, wall+999, clock, w.clock.completed)
	assert.Equal(t, []string{CheckClock}, failed(w))
}

// An open under way when a failed sync dropped the WAL's writes (as XFS
// does) reads the file as the loss left it: what the loss took back is
// forgotten for it, as for an open after it; what a FULL commit covered is
// not, nor anything for an open that began after the loss.
func TestClockCheckForgetsWhatALossTookBackFromAnOpenUnderWay(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	wall := w.wallMillis()
	w.clock.done(wall+1_000, 1, 2, true)  // durable
	w.clock.done(wall+5_000, 3, 4, false) // not durable
	w.clock.attempted = wall + 5_000
	start := w.clock.opening(0) // an open begins
	w.clock.powerLost()         // a dropped sync, while it runs
	clock := w.readClock()
	w.clock.opened(w, p, wall+1_000, clock, w.clock.completedBefore(start, 0))
	assert.Empty(t, w.violations, "the loss took back the mark of the time 5,000 ms ahead")
	w.clock.opened(w, p, wall+999, clock, w.clock.completedBefore(start, 0))
	assert.Equal(t, []string{CheckClock}, failed(w), "what the FULL commit covered stays")

	w.violations = nil
	w.clock.done(wall+7_000, 5, 6, false) // completed after the loss
	start = w.clock.opening(0)
	w.clock.opened(w, p, wall+6_999, clock, w.clock.completedBefore(start, 0))
	assert.Equal(t, []string{CheckClock}, failed(w), "an open with no loss while it ran forgets nothing")
}

// An open that ran while writes a failed sync dropped were not yet found
// (from the drop to a handle's finding them, when it marks the shared
// index) may read, through the index every connection still trusts, what
// the failure took back, older than any durable commit: it has no bound.
// An open wholly before or after that span has; so has one after a power
// loss, or the end of the process whose sync failed, ended it.
func TestClockCheckLetsAnOpenBesideAnUnmarkedLossReadOldMarks(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	wall := w.wallMillis()
	w.clock.done(wall+1_000, 1, 2, true) // durable
	clock := w.readClock()
	before := w.clock.opening(5)
	beside := w.clock.opening(10)
	w.clock.dropped(12, 1)
	w.clock.opened(w, p, wall, clock, w.clock.completedBefore(beside, 14))
	assert.Empty(t, w.violations, "it read while the loss was unmarked")
	w.clock.dropped(14, 1) // another before the mark: the same span
	w.clock.marked(15)
	w.clock.opened(w, p, wall, clock, w.clock.completedBefore(beside, 16))
	assert.Empty(t, w.violations, "it began before the mark")
	w.clock.opened(w, p, wall+999, clock, w.clock.completedBefore(before, 11))
	assert.Equal(t, []string{CheckClock}, failed(w), "an open that ended before the drop is bound")

	w.violations = nil
	after := w.clock.opening(20)
	w.clock.opened(w, p, wall+999, clock, w.clock.completedBefore(after, 22))
	assert.Equal(t, []string{CheckClock}, failed(w), "an open after the mark is bound")

	w.violations = nil
	w.clock.dropped(30, 1)
	w.clock.marked(31) // a power loss, say
	late := w.clock.opening(40)
	w.clock.opened(w, p, wall+999, clock, w.clock.completedBefore(late, 41))
	assert.Equal(t, []string{CheckClock}, failed(w), "so is one after a later span ended")

	// The process whose sync failed looked, and marked the index if it
	// lost anything, before the call that met the failure returned: its
	// end ends the span, another's does not.
	w.violations = nil
	w.clock.dropped(50, 3)
	w.clock.ended(51, 2)
	assert.True(t, w.clock.unmarkedNow(), "another process's end")
	w.clock.ended(52, 3)
	assert.False(t, w.clock.unmarkedNow())
	last := w.clock.opening(53)
	w.clock.opened(w, p, wall+999, clock, w.clock.completedBefore(last, 54))
	assert.Equal(t, []string{CheckClock}, failed(w), "an open after the failing process ended is bound")
}

func TestClockCheckDurableCoversOnlyWhatReturnedBefore(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	wall := w.wallMillis()
	w.clock.attempted = wall + 6_000
	w.clock.done(wall+5_000, 2, 4, false) // ran beside the FULL commit below
	w.clock.done(wall+1_000, 3, 5, true)
	w.clock.powerLost()
	clock := w.readClock()
	w.clock.opened(w, p, wall+1_000, clock, w.clock.completed)
	assert.Empty(t, w.violations, "a FULL commit does not cover a call that ran beside it")

	w.clock.done(wall+6_000, 6, 7, false) // returned before the FULL commit below was called
	w.clock.done(wall+2_000, 8, 9, true)
	w.clock.powerLost()
	w.clock.opened(w, p, wall+5_999, clock, w.clock.completed)
	assert.Equal(t, []string{CheckClock}, failed(w), "it covers one that returned before it was called")
}

func TestClockCheckRejectsDriftWhileRunning(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	p.offset = 100
	w.clock.used(w, p, w.trueMillis+100, w.trueMillis)
	assert.Empty(t, w.violations)
	w.advance(10)
	w.clock.used(w, p, w.trueMillis+100+7, w.trueMillis) // a wall step leaked in
	assert.Equal(t, []string{CheckClock}, failed(w))
}

// A background goroutine of a process may claim a time during Open,
// before the open task reads the engine's time: that claim comes first in
// true time, and the open's later, higher time is not time going back.
func TestClockCheckTakesClaimsMadeDuringOpenFirst(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	p.timed, p.lastNow = false, 0
	start := w.wallMillis()
	w.clock.claimed(w, p, start+100) // the sweeper, during Open
	w.advance(4)
	now := start + 104 // the open task reads the time 4 ms later
	p.offset = now - w.trueMillis
	w.clock.started(w, p, now)
	assert.Empty(t, w.violations)

	w.clock.used(w, p, now-1, w.trueMillis-1) // a call at an earlier time, after the open
	assert.Equal(t, []string{CheckClock}, failed(w), "time going back after the open is still caught")
}

// A process that opened while the wall clock was ahead handed that time
// out and kept it in the high-water mark, whether or not it made a call: a
// later open behind the wall clock starts there, and no further.
func TestClockCheckCountsTheTimeAnOpenUsed(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	ahead := w.wallMillis() + 60_000 // the wall clock had stepped ahead
	p.offset = ahead - w.trueMillis
	w.clock.started(w, p, ahead) // opened, then closed without a call
	clock := w.readClock()       // the wall clock is back
	w.clock.opened(w, p, ahead, clock, w.clock.completed)
	assert.Empty(t, w.violations, "the next open starts at the mark the first left")

	w.clock.opened(w, p, ahead+state.HighWaterLead.Milliseconds()+1, clock, w.clock.completed)
	assert.Equal(t, []string{CheckClock}, failed(w), "beyond it and its lead is still caught")
}

func TestCounterCheckBounds(t *testing.T) {
	tick := int64(0)
	incr := func(unknown bool, full bool) linearizability.Op {
		tick += 2
		op := linearizability.Op{Client: 1, Input: model.Input{Kind: model.IncrBy, Key: hitsKey, Delta: 1},
			Unknown: unknown, Call: tick - 1, Return: tick}
		if full {
			op.Durability = linearizability.Full
		}
		if unknown {
			op.Return = op.Call
		}
		return op
	}
	for _, tc := range []struct {
		name  string
		final int64
		ok    bool
	}{
		{"exact", 3, true}, {"one lost outside a window", 2, false}, {"the unknown one applied", 4, true}, {"more than attempted", 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := quietWorld(t)
			tick = 0
			w.history = []linearizability.Op{incr(false, false), incr(false, false), incr(true, false), incr(false, true)}
			w.history[1].Output.Int, w.history[3].Output.Int = 1, 3 // distinct answers
			w.history[0].Output.Int = 0
			w.counter.read, w.counter.final = true, tc.final
			w.counter.check(w)
			assert.Equal(t, tc.ok, len(w.violations) == 0, "%v", w.violations)
		})
	}
	w := quietWorld(t)
	tick = 0
	w.history = []linearizability.Op{incr(false, false), linearizability.PowerLossAt(10)}
	w.history[0].Output.Int = 1
	w.counter.read = true // 0: the NORMAL increment may be gone, the documented window
	w.counter.check(w)
	assert.Empty(t, w.violations)
}

// TestIntegrityCheckSeesCorruption damages the file behind the engine's
// back: the check at the next recovery must report it.
func TestIntegrityCheckSeesCorruption(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	require.NotNil(t, p.db)
	w.sched.spawn(kindTask, "writer", p, w.newClient(), func(th *thread) {
		for i := range 50 {
			w.verb(th, p, th.client, &model.Input{Kind: model.Set, Key: w.keys[i%len(w.keys)], Value: model.Int(int64(i))})
		}
		w.stop(p, false) // the last close checkpoints the WAL into the file
	})
	require.True(t, w.runUntil(func() bool { return len(w.sched.threads) == 0 }))
	require.Nil(t, p.db)
	require.Empty(t, w.violations)

	f, err := w.m.Process(99).Open(dbPath, vfs.OpenReadWrite)
	require.NoError(t, err)
	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(i * 7)
	}
	_, err = f.WriteAt(garbage[100:], 4096+100) // the second page: a table's b-tree
	require.NoError(t, err)
	require.NoError(t, f.Close())

	w.needCheck = true
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	assert.Contains(t, failed(w), CheckIntegrity)
	assert.True(t, w.teardown())
}
