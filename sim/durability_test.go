package sim

import (
	"testing"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
)

// TestDurabilityIsFullForWhatMustSurviveAPowerLoss: the history marks FULL
// every answered call a power loss may not take back, so that the
// linearizability check holds it to that: a grant (by Lease, or inside a
// committed Update), and on a SyncFull handle every answered write but a
// flush's or a sweep's (whose commits the engine does not sync); reads and
// errors are NORMAL.
func TestDurabilityIsFullForWhatMustSurviveAPowerLoss(t *testing.T) {
	lease := model.Input{Kind: model.Lease, Key: "L", Owner: "o", TTLMillis: 10}
	set := model.Input{Kind: model.Set, Key: "a", Value: model.Int(1)}
	update := model.Input{Kind: model.Update, Ops: []model.Input{set, lease}}
	held := model.Output{Err: model.ErrLeaseHeld}
	for _, c := range []struct {
		what     string
		in       model.Input
		out      model.Output
		syncFull bool
		want     linearizability.Durability
	}{
		{"a grant", lease, model.Output{Token: 1}, false, linearizability.Full},
		{"a refused grant", lease, held, false, linearizability.Normal},
		{"an update that granted", update, model.Output{Sub: []model.Output{{}, {Token: 1}}}, false, linearizability.Full},
		{"an update whose grant was refused", update, model.Output{Sub: []model.Output{{}, held}}, false, linearizability.Normal},
		{"a set", set, model.Output{}, false, linearizability.Normal},
		{"a set on SyncFull", set, model.Output{}, true, linearizability.Full},
		{"a failed set on SyncFull", set, model.Output{Err: model.ErrInvalid}, true, linearizability.Normal},
		{"an update on SyncFull", update, model.Output{Sub: []model.Output{{}, held}}, true, linearizability.Full},
		{"a get on SyncFull", model.Input{Kind: model.Get, Key: "a"}, model.Output{Value: model.Int(1)}, true, linearizability.Normal},
		{"a ttl on SyncFull", model.Input{Kind: model.TTL, Key: "a"}, model.Output{Err: model.ErrNotFound}, true, linearizability.Normal},
		{"a flush on SyncFull", model.Input{Kind: model.Flush}, model.Output{}, true, linearizability.Normal},
		{"a sweep on SyncFull", model.Input{Kind: model.Sweep}, model.Output{}, true, linearizability.Normal},
	} {
		assert.Equal(t, c.want, durability(c.in, c.out, c.syncFull), c.what)
	}
}
