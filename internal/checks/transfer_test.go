package checks

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
)

func TestTransferMovesOneAmount(t *testing.T) {
	in := Transfer("a", "b", 3, false)
	assert.Equal(t, model.Update, in.Kind)
	assert.Equal(t, []model.Input{{Kind: model.IncrBy, Key: "a", Delta: -3}, {Kind: model.IncrBy, Key: "b", Delta: 3}}, in.Ops)
	in = Transfer("a", "b", 3, true)
	assert.Equal(t, []model.Input{{Kind: model.IncrBy, Key: "b", Delta: 3}, {Kind: model.IncrBy, Key: "a", Delta: -3}}, in.Ops)
}

// Every audit that answered must read integers, or no row, summing to
// zero; calls that are not audits of a pair, and audits with no answer,
// say nothing.
func TestAuditsSumToZero(t *testing.T) {
	isPair := func(a, b string) bool { return a == "x" && b == "y" }
	get := func(v int64) model.Output { return model.Output{Value: model.Int(v)} }
	absent := model.Output{Err: model.ErrNotFound}
	audit := func(sub ...model.Output) linearizability.Op {
		return linearizability.Op{Client: 3, Input: Audit("x", "y"), Output: model.Output{Sub: sub}}
	}
	for name, tc := range map[string]struct {
		op   linearizability.Op
		want string
	}{
		"zero":                     {audit(get(-2), get(2)), ""},
		"no rows":                  {audit(absent, absent), ""},
		"one row at zero":          {audit(get(0), absent), ""},
		"half a transfer":          {audit(get(-2), absent), "read x=-2 y=0: part of a transfer"},
		"off by one":               {audit(get(-2), get(3)), "read x=-2 y=3"},
		"bytes":                    {audit(model.Output{Value: model.Bytes("2")}, get(-2)), `read "x" as "2"`},
		"a read short":             {audit(get(0)), "answered 1 reads of 2"},
		"unknown":                  {func() linearizability.Op { op := audit(get(1), get(1)); op.Unknown = true; return op }(), ""},
		"failed":                   {func() linearizability.Op { op := audit(get(1)); op.Output.Err = model.ErrAborted; return op }(), ""},
		"not a pair":               {linearizability.Op{Input: Audit("y", "x"), Output: model.Output{Sub: []model.Output{get(1), get(1)}}}, ""},
		"a transfer, not a read":   {linearizability.Op{Input: Transfer("x", "y", 1, false), Output: model.Output{Sub: []model.Output{{Int: -1}, {Int: 5}}}}, ""},
		"a power loss, not a call": {linearizability.Op{Event: linearizability.PowerLoss, Input: Audit("x", "y")}, ""},
	} {
		vs := Audits([]linearizability.Op{tc.op}, isPair)
		if tc.want == "" {
			assert.Empty(t, vs, name)
			continue
		}
		if assert.Len(t, vs, 1, name) {
			assert.Equal(t, KindAtomicity, vs[0].Kind, name)
			assert.Contains(t, vs[0].Detail, tc.want, name)
		}
	}
}
