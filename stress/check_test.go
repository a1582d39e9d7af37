package stress

import (
	"testing"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
)

// grantOp is a recorded lease grant.
func grantOp(client int, token, call, ret int64) linearizability.Op {
	return linearizability.Op{Client: client, Call: call, Return: ret,
		Input:  model.Input{Kind: model.Lease, Key: "L0", Owner: "w" + string(rune('0'+client)), TTLMillis: 100},
		Output: model.Output{Token: token}}
}

func TestCheckTokensFindsADuplicate(t *testing.T) {
	var r Report
	checkTokens(&r, []linearizability.Op{grantOp(1, 1, 0, 10), grantOp(2, 1, 5, 15), grantOp(1, 2, 20, 30)})
	assert.True(t, r.Has(KindDuplicateToken), "%v", r.Violations)
	assert.Equal(t, 3, r.Grants)
}

func TestCheckTokensFindsATokenGoingDown(t *testing.T) {
	var r Report
	checkTokens(&r, []linearizability.Op{grantOp(1, 5, 0, 10), grantOp(2, 4, 20, 30)})
	assert.True(t, r.Has(KindTokenOrder), "%v", r.Violations)
	assert.False(t, r.Has(KindDuplicateToken))
}

func TestCheckTokensAcceptsExtensionsAndOverlaps(t *testing.T) {
	var r Report
	checkTokens(&r, []linearizability.Op{
		grantOp(1, 1, 0, 10),
		grantOp(1, 1, 20, 30), // the same owner again: extended, same token
		grantOp(2, 3, 40, 60),
		grantOp(3, 2, 35, 70), // overlaps the grant of 3: may be older
		grantOp(3, 4, 80, 90),
	})
	assert.True(t, r.OK(), "%v", r.Violations)
}

func TestCheckFence(t *testing.T) {
	grants := []grant{{name: "L0", client: 1, token: 1}, {name: "L0", client: 2, token: 1}, {name: "L0", client: 3, token: 2}}
	var ok Report
	checkFence(&ok, []fencedWrite{
		{name: "L0", token: 1, client: 1, accepted: true},
		{name: "L0", token: 2, client: 3, accepted: true},
		{name: "L0", token: 1, client: 2, accepted: false},
	}, grants)
	assert.True(t, ok.OK(), "%v", ok.Violations)
	assert.Equal(t, 2, ok.Fenced)
	assert.Equal(t, 1, ok.Refused)

	var dup Report
	checkFence(&dup, []fencedWrite{
		{name: "L0", token: 1, client: 1, accepted: true},
		{name: "L0", token: 1, client: 2, accepted: true},
	}, grants)
	assert.True(t, dup.Has(KindDuplicateToken), "%v", dup.Violations)

	var forged Report
	checkFence(&forged, []fencedWrite{{name: "L0", token: 7, client: 1, accepted: true}}, grants)
	assert.True(t, forged.Has(KindFence), "%v", forged.Violations)

	var down Report
	checkFence(&down, []fencedWrite{
		{name: "L0", token: 2, client: 3, accepted: true},
		{name: "L0", token: 1, client: 1, accepted: true},
	}, grants)
	assert.True(t, down.Has(KindTokenOrder), "%v", down.Violations)
}

// incr is a recorded +1 on counter n0 of epoch 0.
func incr(client int, answer int64, unknown bool) linearizability.Op {
	return linearizability.Op{Client: client, Unknown: unknown,
		Input:  model.Input{Kind: model.IncrBy, Key: "e0/n0", Delta: 1},
		Output: model.Output{Int: answer}}
}

func TestCheckCounters(t *testing.T) {
	history := []linearizability.Op{incr(1, 1, false), incr(2, 2, false), incr(3, 0, true)}
	for _, tc := range []struct {
		final int64
		ok    bool
	}{{1, false}, {2, true}, {3, true}, {4, false}} {
		var r Report
		checkCounters(&r, history, map[string]int64{"e0/n0": tc.final, "e0/n1": 0})
		assert.Equal(t, tc.ok, r.OK(), "final %d: %v", tc.final, r.Violations)
	}

	var r Report
	checkCounters(&r, []linearizability.Op{incr(1, 1, false), incr(2, 1, false)}, map[string]int64{"e0/n0": 2})
	assert.True(t, r.Has(KindCounter), "two increments answered 1: %v", r.Violations)
}

func TestCounterKeysIn(t *testing.T) {
	history := []linearizability.Op{incr(1, 1, false), incr(1, 2, false),
		{Input: model.Input{Kind: model.IncrBy, Key: "e3/a", Delta: 1}},
		{Input: model.Input{Kind: model.IncrBy, Key: "e3/n1", Delta: 1}}}
	assert.Equal(t, []string{"e0/n0", "e3/n1"}, counterKeysIn(history))
}

func TestEpochOf(t *testing.T) {
	for _, tc := range []struct {
		in    model.Input
		epoch int64
		ok    bool
	}{
		{model.Input{Kind: model.Get, Key: "e12/a"}, 12, true},
		{model.Input{Kind: model.Del, Keys: []string{"e3/a", "e3/b"}}, 3, true},
		{model.Input{Kind: model.Update, Ops: []model.Input{{Kind: model.Set, Key: "e0/c"}}}, 0, true},
		{model.Input{Kind: model.Lease, Key: "e7/L0"}, 7, true},
		{model.Input{Kind: model.Sweep}, 0, false},
		{model.Input{Kind: model.Get, Key: "a"}, 0, false},
	} {
		e, ok := epochOf(tc.in)
		assert.Equal(t, tc.ok, ok, "%s", tc.in)
		assert.Equal(t, tc.epoch, e, "%s", tc.in)
	}
}

func TestReportListsEachViolationOnce(t *testing.T) {
	var r Report
	for i := 0; i < 3; i++ {
		r.violate(KindCounter, "same")
	}
	for i := 0; i < maxViolationsPerKind+5; i++ {
		r.violate(KindFence, "write %d", i)
	}
	assert.Len(t, r.Violations, 1+maxViolationsPerKind)
	assert.Equal(t, 5, r.Dropped)
	assert.Equal(t, "FAIL", r.Verdict())
}
