package stress

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFlushRecorderLeavesKeptKeysOut: a flush that wrote some keys and
// kept others for the next flush (a Redis cluster master that refused its
// keys) is journalled as the flush of the written and dropped keys only,
// answered; the kept keys' deltas are still buffered, and the flush that
// writes them later records them again. Recording them in this flush
// would count them twice.
func TestFlushRecorderLeavesKeptKeysOut(t *testing.T) {
	dir := t.TempDir()
	opsPath := filepath.Join(dir, "ops")
	j, err := openJournal(opsPath, filepath.Join(dir, "notes"))
	require.NoError(t, err)
	w := &worker{cfg: workerConfig{WallClock: true, Remote: true, Goroutines: 1}, journal: j}
	f := &flushRecorder{w: w}
	_, done := f.Flushing(map[string]int64{"a": 1, "b": 2, "c": 3})
	done(1000, &state.FlushError{
		Dropped: map[string]error{"c": state.ErrNotInteger},
		Kept:    map[string]error{"b": state.ErrUnavailable},
	}, false)
	require.NoError(t, j.close())

	raw, err := os.Open(opsPath)
	require.NoError(t, err)
	defer raw.Close()
	ops, err := linearizability.Decode(raw)
	require.NoError(t, err)
	require.Len(t, ops, 1)
	op := ops[0]
	assert.False(t, op.Unknown, "answered: every key it sent has its outcome")
	require.Len(t, op.Input.Ops, 2, "b's delta was kept, not flushed: %v", op.Input)
	assert.Equal(t, "a", op.Input.Ops[0].Key)
	assert.Equal(t, "c", op.Input.Ops[1].Key)
	require.Len(t, op.Output.Sub, 2)
	assert.Equal(t, model.ErrNone, op.Output.Sub[0].Err)
	assert.Equal(t, model.ErrNotInteger, op.Output.Sub[1].Err)
}
