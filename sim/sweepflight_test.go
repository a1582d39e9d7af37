package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state/vfs"
)

// A group commit's leader runs the sweep batches other goroutines queued,
// each told of by the goroutine that queued it once its commit is synced,
// and then its own inline sweep. Each statement stays in flight until it is
// told of, whichever goroutine ran it: a process that dies before then
// leaves each one it had committed as an unknown sweep. When the simulator
// kept one sweep in flight per goroutine, the leader's inline sweep took the
// place of the batch it had run for another, and a crash before the batch
// was told of left the keys it deleted out of the history (statesim -seed
// 9880272: an expired key gone after a power loss, with no call that could
// have deleted it).
func TestSweepsInFlightOutliveTheGoroutineThatRanThem(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	leader := &thread{proc: p, name: "leader"}
	w.sched.threads = append(w.sched.threads, leader)
	w.sched.cur = leader
	o := sweepObserver{w: w, p: p}

	o.Sweeping(100, false) // another goroutine's batch, run by the leader; the crash comes before it is told of
	commit(t, w, p.pid)
	inline := o.Sweeping(100, true) // the leader's own, after the group
	inline(nil, nil)                // it found nothing to delete
	w.sched.cur = nil
	w.sched.freeze(p) // the process dies

	require.Len(t, w.history, 1, "the batch's sweep, whose outcome the crash hid")
	op := w.history[0]
	assert.True(t, op.Unknown)
	assert.Equal(t, model.Sweep, op.Input.Kind)
	assert.Equal(t, int64(100), op.Input.NowMillis)
}

// commit writes through pid's view of the disk, as a commit's frames do.
func commit(t *testing.T, w *world, pid int) {
	t.Helper()
	f, err := w.m.Process(pid).Open(dbPath+"-wal", vfs.OpenReadWrite|vfs.OpenCreate)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("frame"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
