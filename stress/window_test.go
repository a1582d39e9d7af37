package stress

import (
	"testing"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// at is a call by client c over [call, ret] (monotonic ns) that ran at
// server time now (ms); ret 0 and unknown for a lost answer.
func at(c int, call, ret, now int64, kind model.Kind) linearizability.Op {
	return linearizability.Op{Client: c, Call: call, Return: ret, Unknown: ret == 0,
		Input: model.Input{Kind: kind, Key: "e0/a", Delta: 1, NowMillis: now}}
}

// A lost write may have run from just before its estimate to just after
// the first call, of any client, made once its client gave up on it; a
// lost read keeps its time.
func TestUnknownWindowEndsAtTheFirstCallAfterTheClientGaveUp(t *testing.T) {
	history := []linearizability.Op{
		at(1, 10, 0, 1000, model.IncrBy), // lost; client 1 gives up by 50
		at(2, 20, 30, 990, model.Get),    // called before: no bound
		at(1, 50, 55, 1230, model.Get),   // client 1's next call
		at(3, 60, 65, 1200, model.Get),   // the least known server time from 50 on
		at(4, 70, 75, 1300, model.Get),
		at(5, 80, 0, 1250, model.Get),    // a lost read
		at(6, 90, 0, 1260, model.IncrBy), // lost, nothing after it
	}
	// Seen dead at 62: bounded by the calls from 62 on, not by client 3's.
	dead := at(7, 40, 62, 1100, model.Set)
	dead.Unknown = true
	history = append(history[:3], append([]linearizability.Op{dead}, history[3:]...)...)

	out := widenUnknownTimes(history)
	require.Len(t, out, len(history))
	assert.Equal(t, int64(1000), history[0].Input.NowMillis, "history is not changed")
	assert.Zero(t, history[0].NowLatest)

	assert.Equal(t, int64(998), out[0].Input.NowMillis)
	assert.Equal(t, int64(1200+turnSlackMillis), out[0].NowLatest)
	assert.Equal(t, int64(1098), out[3].Input.NowMillis)
	assert.Equal(t, int64(1300+turnSlackMillis), out[3].NowLatest, "from its death on: client 4's call, not client 3's earlier one nor the lost read")
	assert.Equal(t, int64(1250), out[6].Input.NowMillis, "a read keeps its time")
	assert.Zero(t, out[6].NowLatest)
	assert.Equal(t, int64(1258), out[7].Input.NowMillis)
	assert.Equal(t, int64(1300+turnSlackMillis), out[7].NowLatest, "nothing after it: the run's latest server time")
	for _, i := range []int{1, 2, 4, 5} {
		assert.Equal(t, history[i], out[i], "known op %d", i)
	}
}
