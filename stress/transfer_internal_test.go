package stress

import (
	"math/rand/v2"
	"testing"

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
)

// An audit reads one epoch's pair, in order; nothing else is one.
func TestTransferPairIsOneEpochs(t *testing.T) {
	assert.True(t, isTransferPair("e3/xa", "e3/xb"))
	assert.False(t, isTransferPair("e3/xb", "e3/xa"), "in order")
	assert.False(t, isTransferPair("e3/xa", "e4/xb"), "one epoch")
	assert.False(t, isTransferPair("xa", "xb"), "an epoch's")
	assert.False(t, isTransferPair("e3/a", "e3/xb"))
}

// The workload's transfers move one amount within the epoch's pair, and
// its audits are what the atomicity check reads: one that answered a sum
// other than zero is reported.
func TestTransfersAndAuditsAreTheChecks(t *testing.T) {
	w := workload{rng: rand.New(rand.NewPCG(1, 2)), prefix: epochPrefix(7)}
	var transfers, audits int
	for range 300 {
		in := w.transfer()
		assert.Equal(t, model.Update, in.Kind)
		if in.Ops[0].Kind == model.Get {
			half := linearizability.Op{Input: in, Output: model.Output{Sub: []model.Output{{Value: model.Int(2)}, {Err: model.ErrNotFound}}}}
			assert.True(t, checks.IsAudit(half, isTransferPair))
			assert.Len(t, checks.Audits([]linearizability.Op{half}, isTransferPair), 1)
			audits++
			continue
		}
		keys := []string{in.Ops[0].Key, in.Ops[1].Key}
		assert.ElementsMatch(t, []string{"e7/xa", "e7/xb"}, keys)
		assert.Equal(t, -in.Ops[0].Delta, in.Ops[1].Delta)
		assert.NotZero(t, in.Ops[0].Delta)
		transfers++
	}
	assert.InDelta(t, 100, audits, 30, "a third are audits")
	assert.Equal(t, 300, transfers+audits)
}
