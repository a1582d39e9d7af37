package sim

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/model"
)

// Every stream is a subsystem's own: two with one number draw the same
// numbers, and a draw in one subsystem follows the other's.
func TestStreamsAreDistinct(t *testing.T) {
	streams := []uint64{streamShape, streamWork, streamTime, streamLife, streamSched,
		streamForeign, streamForeignHold, streamForeignRead, streamRecipe, streamTransfer, streamGroup}
	for k := range faultKinds {
		streams = append(streams, streamFault+uint64(k))
	}
	sorted := slices.Clone(streams)
	slices.Sort(sorted)
	assert.Equal(t, len(sorted), len(slices.Compact(sorted)), "stream numbers: %x", streams)
}

// The rows a power loss recovered to must hold the pair at a sum of zero,
// and only integers without a deadline.
func TestTransferRecoveredRowsAreAudited(t *testing.T) {
	a, b := transferKeys[0], transferKeys[1]
	for name, tc := range map[string]struct {
		kv   map[string]model.Entry
		fail bool
	}{
		"no rows":                 {map[string]model.Entry{}, false},
		"both":                    {map[string]model.Entry{a: {Value: model.Int(-4)}, b: {Value: model.Int(4)}}, false},
		"one at zero":             {map[string]model.Entry{a: {Value: model.Int(0)}}, false},
		"half a transfer":         {map[string]model.Entry{a: {Value: model.Int(-4)}}, true},
		"a sum off by one":        {map[string]model.Entry{a: {Value: model.Int(-4)}, b: {Value: model.Int(5)}}, true},
		"bytes":                   {map[string]model.Entry{a: {Value: model.Bytes("0")}}, true},
		"a deadline":              {map[string]model.Entry{a: {Value: model.Int(0), ExpiresAt: 5}}, true},
		"other keys do not count": {map[string]model.Entry{"k0": {Value: model.Int(3)}}, false},
	} {
		w := quietWorld(t)
		s := model.NewState()
		s.KV = tc.kv
		w.transferRecovered(s)
		if tc.fail {
			assert.Equal(t, []string{CheckAtomicity}, failed(w), name)
		} else {
			assert.Empty(t, w.violations, name)
		}
	}
}

// Transfers and audits are made, answered and recorded: a default run has
// both, each an Update of the pair and nothing else, and its last audit
// is the verifier's.
func TestTransfersAndAuditsAreRecorded(t *testing.T) {
	rep, err := Run(DefaultConfig(1))
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Violations)
	var transfers, audits int
	for _, op := range rep.History {
		in := op.Input
		if in.Kind != model.Update || len(in.Ops) != 2 || !slices.Contains(transferKeys, in.Ops[0].Key) {
			continue
		}
		if op.Unknown || op.Output.Err != model.ErrNone {
			continue
		}
		switch in.Ops[0].Kind {
		case model.IncrBy:
			assert.Equal(t, -in.Ops[0].Delta, in.Ops[1].Delta, "a transfer moves one amount")
			assert.NotEqual(t, in.Ops[0].Key, in.Ops[1].Key)
			transfers++
		case model.Get:
			assert.Equal(t, transferKeys, []string{in.Ops[0].Key, in.Ops[1].Key})
			audits++
		}
	}
	assert.Positive(t, transfers, "answered transfers")
	assert.Greater(t, audits, 1, "answered audits: the clients' and the verifier's")
}
