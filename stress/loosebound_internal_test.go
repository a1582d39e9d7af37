package stress

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReportCountsLooseOutageBounds: an unknown outcome on Redis last
// heard of after a server restart that began after its call may have
// reached the new server, and is bounded by a later server's death (or its
// process's end) instead of the kill of the server running at its call.
// The report counts them, so a run shows how sharp its check stayed; a
// lost answer heard of before the restart, one called after it, a refused
// call and an answered one are not counted.
func TestReportCountsLooseOutageBounds(t *testing.T) {
	dir := t.TempDir()
	p := &proc{cfg: workerConfig{Journal: filepath.Join(dir, "j"), Notes: filepath.Join(dir, "n"), Client: 1, Goroutines: 2},
		killed: true, endNanos: 1000}
	j, err := openJournal(p.cfg.Journal, p.cfg.Notes)
	require.NoError(t, err)
	incr := model.Input{Kind: model.IncrBy, Key: "e0/n0", Delta: 1, NowMillis: 1}
	ops := []linearizability.Op{
		{Client: 1, Seq: 1, Call: 50, Unknown: true, Input: incr},  // heard of at 120, before the relaunch at 160
		{Client: 1, Seq: 2, Call: 55, Unknown: true, Input: incr},  // heard of at 200, after it: loose
		{Client: 1, Seq: 3, Call: 170, Unknown: true, Input: incr}, // called after it, heard of at 250
		{Client: 1, Seq: 4, Call: 350, Unknown: true, Input: incr}, // cut by the kill at 1000, after the relaunch at 360: loose
		{Client: 2, Seq: 1, Call: 60, Unknown: true, Input: incr},  // refused at 200
		{Client: 2, Seq: 2, Call: 70, Return: 80, Input: incr, Output: model.Output{N: 1}},
	}
	for _, op := range ops {
		require.NoError(t, j.op(op))
	}
	for _, n := range []note{
		{Kind: noteUncertain, Client: 1, Seq: 1, Call: 50, Return: 120},
		{Kind: noteUncertain, Client: 1, Seq: 2, Call: 55, Return: 200},
		{Kind: noteUncertain, Client: 1, Seq: 3, Call: 170, Return: 250},
		{Kind: noteRefused, Client: 2, Seq: 1, Call: 60, Return: 200},
	} {
		require.NoError(t, j.note(n))
	}
	require.NoError(t, j.close())
	d := &driver{report: &Report{}, procs: []*proc{p}, redis: &redisRun{outages: []outage{
		{kill: 100, dead: 110, relaunch: 160, up: 170},
		{kill: 300, dead: 310, relaunch: 360, up: 370},
	}}}
	require.NoError(t, d.readNotes())
	history, err := d.history()
	require.NoError(t, err)
	bounds := map[[2]int64]int64{}
	for _, op := range history {
		bounds[[2]int64{int64(op.Client), op.Seq}] = op.Return
	}
	assert.Equal(t, map[[2]int64]int64{{1, 1}: 110, {1, 2}: 310, {1, 3}: 310, {1, 4}: 1000, {2, 2}: 80}, bounds)
	assert.Equal(t, 2, d.report.LooseBound)
	d.report.Redis = "127.0.0.1:1"
	var b strings.Builder
	_, err = d.report.WriteTo(&b)
	require.NoError(t, err)
	assert.Contains(t, b.String(), "\nbounds:      2 unknown outcomes heard of only after a restart past their call")
}
