package sim

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
)

// foreignConfig is a run with the foreign program drawn often, and
// statectl visits often enough to meet the write it leaves hot.
func foreignConfig(seed uint64) Config {
	cfg := DefaultConfig(seed)
	cfg.Rates.Foreign = 0.2
	cfg.Rates.Inspect = 0.1
	return cfg
}

// TestForeignProgramChangesNothing: plain SQLite switches the file to
// rollback mode while no process has it open, and is killed in a write
// with changed pages spilled into the file, or the power goes under it;
// or it writes in WAL mode beside the processes, its pages spilled into
// the WAL, and is killed; or it keeps a read snapshot beside them, and
// ends its read or is killed.
// Every history stays linearizable: the writable Opens after it roll the
// write back and put the file back in WAL mode, and read-only Opens are
// refused with ErrUnfinishedWrite only until one has. The runs must reach
// each of these.
func TestForeignProgramChangesNothing(t *testing.T) {
	var trace strings.Builder
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if testing.Short() {
		seeds = []uint64{2, 4, 6, 10} // under the race detector: each event is reached in these too
	}
	for _, seed := range seeds {
		cfg := foreignConfig(seed)
		cfg.Trace = &trace
		r, err := Run(cfg)
		require.NoError(t, err)
		require.True(t, r.OK(), "seed %d: %v", seed, r.Violations)
	}
	for what, re := range map[string]string{
		"switch to rollback mode": `sqlite3\) done, the file in rollback mode: ok`,
		"kill before the commit": `sqlite3\) killed before its commit
`,
		"kill in WAL mode beside processes":   `sqlite3\) killed before its commit, its pages in the WAL`,
		"write lock held":                     `sqlite3\) holds the write lock for \d+ms`,
		"power cut under it":                  `armed at mutating call \d+, as sqlite3 runs`,
		"read-only open refused by its write": `open: a write outside the WAL not rolled back yet`,
		"read snapshot kept":                  `sqlite3\) keeps a read snapshot \(\d+ keys, \d+ leases\) for \d+ms`,
		"read ended, the program exits":       `sqlite3\) ends its read and exits: ok`,
		"kill in a read":                      `sqlite3\) killed in its read`,
	} {
		require.Regexp(t, regexp.MustCompile(re), trace.String(), "no run reached: %s", what)
	}
}

// TestForeignCommitIsCaught: a foreign program that commits its write
// changes every key's value and deletes the leases; the linearizability
// check must say so.
func TestForeignCommitIsCaught(t *testing.T) {
	foreignCommits = true
	t.Cleanup(func() { foreignCommits = false })
	for seed := uint64(1); seed <= 12; seed++ {
		r, err := Run(foreignConfig(seed))
		require.NoError(t, err)
		for _, v := range r.Violations {
			if v.Check == CheckLinearizability {
				return
			}
		}
	}
	t.Fatal("a foreign program's committed write went unseen by the linearizability check in 12 seeds")
}

// TestForeignKillLeavesAHalfDoneWrite: the foreign program's kill leaves
// a hot -journal and a file that, read without it, holds the half-done
// write (a value of zeros, or pages SQLite calls malformed): what the
// writable Open after it must roll back. A read-only visit then is refused, and no check fails;
// the writable Open after it reads every value the clients wrote.
func TestForeignKillLeavesAHalfDoneWrite(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	idle := func(q *process) func() bool {
		return func() bool {
			for _, th := range w.sched.threads {
				if th.proc == q && !th.done {
					return false
				}
			}
			return !q.starting && !q.stopping
		}
	}
	write := func() {
		w.sched.spawn(kindTask, "writer", p, w.newClient(), func(th *thread) {
			for _, k := range w.keys {
				w.verb(th, p, th.client, &model.Input{Kind: model.Set, Key: k, Value: model.Int(7)})
			}
		})
	}
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	write()
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	w.stop(p, false)
	require.True(t, w.runUntil(idle(p)))

	w.foreignNext = &foreignPlan{write: true, mode: "delete"}
	require.True(t, w.foreignStart())
	require.True(t, w.runUntil(idle(w.outsider)))
	require.Contains(t, w.m.Files(), dbPath+"-journal")

	// Read without the journal, on a copy: the half-done write.
	cp := w.m.Copy(1)
	require.NoError(t, cp.Process(0).Delete(dbPath+"-journal"))
	db, err := state.Open(dbPath, state.WithFS(cp.Process(0)), state.WithReadOnly(),
		state.WithClock(fixedClock{time.UnixMilli(w.wallMillis())}))
	require.NoError(t, err)
	v, err := db.Get(t.Context(), w.keys[0])
	if err == nil {
		assert.NotEqual(t, "7", string(v.Bytes()), "the file holds the foreign write's pages")
	} else {
		assert.ErrorIs(t, err, state.ErrCorrupt, "the file holds the foreign write's pages")
	}
	require.NoError(t, db.Close())

	visit(t, w, 1)
	assert.Zero(t, w.inspector.incarnation, "the read-only visit is refused")
	assert.True(t, w.hotMaybe)
	require.Empty(t, w.violations)

	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	require.NotNil(t, p.db, "the writable open rolls the write back")
	assert.False(t, w.hotMaybe || w.rollbackMode)
	var got []model.Value
	w.sched.spawn(kindTask, "reader", p, w.newClient(), func(th *thread) {
		for _, k := range w.keys {
			out, _ := w.verb(th, p, th.client, &model.Input{Kind: model.Get, Key: k})
			got = append(got, out.Value)
		}
	})
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	require.Len(t, got, len(w.keys))
	for i, v := range got {
		assert.Equal(t, model.Int(7), v, w.keys[i])
	}
	require.Empty(t, w.violations)
	assert.NotContains(t, w.m.Files(), dbPath+"-journal", "rolled back, the journal is gone")
}

// TestForeignWALWriterLeavesFramesNoCommitFollows: the foreign program
// that writes in WAL mode beside a running process leaves frames in the
// WAL that no commit follows; the process reads its values on, and writes
// over them.
func TestForeignWALWriterLeavesFramesNoCommitFollows(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	calls := func(kind model.Kind, v int64) []model.Output {
		var outs []model.Output
		w.sched.spawn(kindTask, "client", p, w.newClient(), func(th *thread) {
			for _, k := range w.keys {
				out, _ := w.verb(th, p, th.client, &model.Input{Kind: kind, Key: k, Value: model.Int(v)})
				outs = append(outs, out)
			}
		})
		require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
		return outs
	}
	walSize := func() int64 {
		f, err := w.m.Process(foreignPID).Open(dbPath+"-wal", vfs.OpenReadOnly|vfs.OpenWAL)
		require.NoError(t, err)
		defer f.Close()
		n, err := f.Size()
		require.NoError(t, err)
		return n
	}
	calls(model.Set, 7)
	before := walSize()

	w.foreignNext = &foreignPlan{write: true, wal: true}
	require.True(t, w.foreignStart(), "it starts beside a running process")
	require.True(t, w.runUntil(func() bool { return !w.outsider.starting }))
	assert.Greater(t, walSize(), before+foreignBlob, "its pages went into the WAL")
	assert.False(t, w.hotMaybe, "no journal in WAL mode")

	for i, out := range calls(model.Get, 0) {
		assert.Equal(t, model.Int(7), out.Value, w.keys[i])
	}
	calls(model.Set, 8)
	for i, out := range calls(model.Get, 0) {
		assert.Equal(t, model.Int(8), out.Value, w.keys[i])
	}
	require.Empty(t, w.violations)
}

// TestForeignHoldExplainsBusy: while the foreign program holds the write
// lock, a process's write waits its busy timeout and fails with ErrBusy,
// which the hold explains; the same error once no one holds the lock or
// was paused is an engine error.
func TestForeignHoldExplainsBusy(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))

	w.foreignNext = &foreignPlan{write: true, wal: true, hold: 8000}
	require.True(t, w.foreignStart())
	require.True(t, w.runUntil(func() bool { return w.foreignHolding }))
	var err error
	var before mark
	w.sched.spawn(kindTask, "writer", p, w.newClient(), func(*thread) {
		before = w.mark()
		err = p.db.Set(t.Context(), w.keys[0], []byte("x"))
	})
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	require.ErrorIs(t, err, state.ErrBusy)
	assert.Equal(t, failBusy, w.classify(p, "set", err, before))
	assert.Empty(t, w.violations, "the hold explains it")
	assert.False(t, w.foreignHolding, "killed after its hold")

	w.classify(p, "set", err, w.mark())
	assert.Equal(t, []string{CheckEngineError}, failed(w), "with no hold and no pause, nothing explains it")
}
