package stress

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReaderIsCheckedWithoutFlushesOrSweeps: a reader's history goes
// through the same checks as a writer's. It has no flush and no sweep op,
// so it buffered and flushed nothing, and no check reports it for that;
// its reads of a counter key leave the counter's bounds alone; its calls
// are counted as the readers'. It started from a killed writer's mark,
// ahead of the wall clock, and a writer that started after it ran behind
// the time it used: no violation, since a reader writes no mark. Marked
// writable, the same reader's time is one the later writer had to start
// after.
func TestReaderIsCheckedWithoutFlushesOrSweeps(t *testing.T) {
	const ms = int64(1e6)
	// at is an op of client that ran at engine time now within
	// [call, call+1ms], times in milliseconds of CLOCK_MONOTONIC.
	at := func(client int, seq int64, in model.Input, out model.Output, now, call int64) linearizability.Op {
		in.NowMillis = now
		return linearizability.Op{Client: client, Seq: seq, Input: in, Output: out, Call: call * ms, Return: (call + 1) * ms}
	}
	get := func(key string) model.Input { return model.Input{Kind: model.Get, Key: key} }
	incr := model.Input{Kind: model.IncrBy, Key: "e0/n0", Delta: 1}
	run := func(t *testing.T, readOnly bool) *Report {
		dir := t.TempDir()
		d := &driver{report: &Report{}}
		// Each proc: its first client, whether it reads only, when it was
		// launched (ms), whether it was killed, and its ops.
		for i, p := range []struct {
			client   int
			readOnly bool
			launched int64
			killed   bool
			ops      []linearizability.Op
		}{
			{1, false, 0, true, []linearizability.Op{at(1, 1, incr, model.Output{Int: 1}, 1010, 10)}},
			{5, readOnly, 20, true, []linearizability.Op{
				at(5, 1, get("e0/n0"), model.Output{Value: model.Int(1)}, 1530, 30),
				at(6, 1, model.Input{Kind: model.TTL, Key: "e0/a"}, model.Output{Err: model.ErrNotFound}, 1532, 32),
				at(6, 2, model.Input{Kind: model.Scan, Key: "e0/n"},
					model.Output{Rows: []model.KeyRow{{Key: "e0/n0", Entry: model.Entry{Value: model.Int(1)}}}}, 1534, 34)}},
			{9, false, 40, false, []linearizability.Op{
				at(9, 1, incr, model.Output{Int: 2}, 1050, 50),
				at(9, 2, get("e0/n0"), model.Output{Value: model.Int(2)}, 1052, 52)}},
		} {
			pr := &proc{index: i, launched: p.launched * ms, killed: p.killed, endNanos: (p.launched + 15) * ms,
				cfg: workerConfig{Journal: filepath.Join(dir, fmt.Sprintf("j%d", i)), Notes: filepath.Join(dir, fmt.Sprintf("n%d", i)),
					Client: p.client, Goroutines: 2, ReadOnly: p.readOnly}}
			j, err := openJournal(pr.cfg.Journal, pr.cfg.Notes)
			require.NoError(t, err)
			for _, op := range p.ops {
				require.NoError(t, j.op(op))
			}
			require.NoError(t, j.close())
			d.procs = append(d.procs, pr)
		}
		assert.Equal(t, 1, d.procOf(6), "the reader's second client")
		assert.Equal(t, 1, d.procOf(8), "the reader's unused sweep client")
		assert.Equal(t, 2, d.procOf(9))
		assert.False(t, d.isSweeper(5) || d.isSweeper(6))
		require.NoError(t, d.readNotes())
		history, err := d.history()
		require.NoError(t, err)
		d.count(history)
		res := linearizability.Check(history, time.Minute)
		require.True(t, res.Ok(), "%s\n%s", res, res.Description)
		require.NoError(t, d.checkNotes(history))
		d.checkClocks(history)
		d.report.violations(checks.Counter(history, "e0/n0", 2))
		return d.report
	}

	r := run(t, true)
	assert.Empty(t, r.Violations)
	assert.Equal(t, 6, r.Operations)
	assert.Equal(t, 3, r.ReaderCalls)
	assert.Equal(t, 1, r.ReaderListings, "its listing came through the journal")

	r = run(t, false)
	assert.Zero(t, r.ReaderCalls)
	require.Len(t, r.Violations, 1, "%v", r.Violations)
	assert.Equal(t, KindClock, r.Violations[0].Kind)
	assert.Contains(t, r.Violations[0].Detail, "worker c9, started at ")
}
