package stress

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCleanExitWithAnUnansweredOpIsAViolation: a worker that exited
// cleanly answered every op it journalled as begun, or noted its error.
// One it left without either was not cut by a kill: the engine left it
// unfinished. A flush Close began and never ended lost its increments,
// yet as an unknown op it would count as taken (checks.Buffered) and as
// increments that may not have applied (checks.Counter), and the run
// would pass; it is reported, and so is a call left so. The same ops in
// a killed worker, or in one that failed (already reported), are cut; an
// op whose error a note tells is reported through that note.
func TestCleanExitWithAnUnansweredOpIsAViolation(t *testing.T) {
	flush := model.Input{Kind: model.Flush, NowMillis: 5, Ops: []model.Input{{Kind: model.IncrBy, Key: "e0/n0", Delta: 2}}}
	set := model.Input{Kind: model.Set, Key: "e0/a", Value: model.Int(1), NowMillis: 5}
	run := func(t *testing.T, killed bool, exitErr error, notes []note) *Report {
		dir := t.TempDir()
		p := &proc{cfg: workerConfig{Journal: filepath.Join(dir, "j"), Notes: filepath.Join(dir, "n"), Client: 1, Goroutines: 1},
			killed: killed, exitErr: exitErr, endNanos: 1000}
		j, err := openJournal(p.cfg.Journal, p.cfg.Notes)
		require.NoError(t, err)
		for _, op := range []linearizability.Op{
			{Client: 1, Seq: 1, Call: 10, Return: 20, Input: set},                        // answered
			{Client: 1, Seq: 2, Call: 30, Unknown: true, Input: set},                     // begun, never answered
			{Client: p.cfg.flushClient(), Seq: 1, Call: 40, Unknown: true, Input: flush}, // Close's flush, never ended
		} {
			require.NoError(t, j.op(op))
		}
		for _, n := range notes {
			require.NoError(t, j.note(n))
		}
		require.NoError(t, j.close())
		d := &driver{report: &Report{}, procs: []*proc{p}}
		require.NoError(t, d.readNotes())
		history, err := d.history()
		require.NoError(t, err)
		assert.Len(t, history, 3, "every op stays in the history, as unknown")
		return d.report
	}

	r := run(t, false, nil, nil)
	assert.Equal(t, []Violation{
		{Kind: KindWorker, Detail: "worker c1 exited cleanly, but c1 #2 " + set.String() + " never answered"},
		{Kind: KindBuffered, Detail: "worker c1 closed cleanly, but its flush #1 (" + flush.String() + ") never ended: the increments it took may never have been written"},
	}, r.Violations)

	assert.Empty(t, run(t, true, nil, nil).Violations, "a kill cut them")
	assert.Empty(t, run(t, false, errors.New("exit status 1"), nil).Violations, "its failure is reported (KindWorker) by the driver")
	r = run(t, false, nil, []note{{Kind: noteUncertain, Client: 1, Seq: 2, Op: "set", Err: "lost"}})
	require.Len(t, r.Violations, 1, "the set's lost answer is noted, and reported from the note: %v", r.Violations)
	assert.Equal(t, KindBuffered, r.Violations[0].Kind)
}

// An op a kill cut (begun, never answered) is taken as unknown until its
// process was seen dead, not later: its effect, if any, came before. One
// whose worker gave up on it (an error it could not explain, so it has a
// return) keeps that return.
func TestCutOpIsBoundedByItsProcesssDeath(t *testing.T) {
	set := model.Input{Kind: model.Set, Key: "e0/a", Value: model.Int(1), NowMillis: 5}
	dir := t.TempDir()
	p := &proc{cfg: workerConfig{Journal: filepath.Join(dir, "j"), Notes: filepath.Join(dir, "n"), Client: 1, Goroutines: 2},
		killed: true, endNanos: 1000}
	j, err := openJournal(p.cfg.Journal, p.cfg.Notes)
	require.NoError(t, err)
	require.NoError(t, j.op(linearizability.Op{Client: 1, Seq: 1, Call: 30, Unknown: true, Input: set}))
	require.NoError(t, j.op(linearizability.Op{Client: 2, Seq: 1, Call: 40, Return: 60, Unknown: true, Input: set}))
	require.NoError(t, j.close())
	d := &driver{report: &Report{}, procs: []*proc{p}}
	require.NoError(t, d.readNotes())
	history, err := d.history()
	require.NoError(t, err)
	require.Len(t, history, 2)
	assert.Equal(t, int64(1000), history[0].Return, "cut by the kill: until the process was seen dead")
	assert.Equal(t, int64(60), history[1].Return, "given up on: its own return")
	assert.Equal(t, 1, d.report.Cut)
	assert.Equal(t, 1, d.report.Failed)
}
