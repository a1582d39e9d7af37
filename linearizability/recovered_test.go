package linearizability

import (
	"strings"
	"testing"

	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recoveredAt returns a power loss at at after which the recorder read
// keys and leases: their rows are in kv and rows (a name missing there was
// absent).
func recoveredAt(at int64, keys, leases []string, kv map[string]model.Entry, rows map[string]model.LeaseRow) Op {
	op := PowerLossAt(at)
	st := model.NewState()
	for k, e := range kv {
		st.KV[k] = e
	}
	for k, r := range rows {
		st.Leases[k] = r
	}
	op.Recovered = &Recovery{Keys: keys, Leases: leases, State: st}
	return op
}

func row(v int64) map[string]model.Entry { return map[string]model.Entry{"a": {Value: model.Int(v)}} }

func TestRecoveredHistories(t *testing.T) {
	a := []string{"a"}
	runChecks(t, []checkCase{
		{name: "recovered to a row the power loss may roll back to", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, set("a", model.Int(2)), ok),
			do(0, 5, 6, t0, set("a", model.Int(3)), ok),
			recoveredAt(7, a, nil, row(2), nil),
			do(0, 10, 11, t0+1, get("a"), val(model.Int(2))),
		}},
		{name: "recovered to a row no commit left", verdict: Illegal, partition: "k:a", mentions: "power loss at 7 (the file recovered 5)", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, set("a", model.Int(2)), ok),
			recoveredAt(7, a, nil, row(5), nil),
		}},
		{name: "the recovered row binds what is read after", verdict: Illegal, partition: "k:a", mentions: "spec: 1", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, set("a", model.Int(2)), ok),
			recoveredAt(7, a, nil, row(1), nil),
			do(0, 10, 11, t0+1, get("a"), val(model.Int(2))),
		}},
		{name: "recovered to before a FULL commit", verdict: Illegal, partition: "k:a", mentions: "power loss", history: []Op{
			full(do(0, 1, 2, t0, set("a", model.Int(1)), ok)),
			do(0, 3, 4, t0, set("a", model.Int(2)), ok),
			recoveredAt(7, a, nil, nil, nil),
		}},
		{name: "recovered to before a durable point", verdict: Illegal, partition: "k:a", mentions: "power loss", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			DurableWithin(3, 3),
			do(0, 4, 5, t0, set("a", model.Int(2)), ok),
			recoveredAt(7, a, nil, nil, nil),
		}},
		{name: "recovered to the row at the durable point", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			DurableWithin(3, 3),
			do(0, 4, 5, t0, set("a", model.Int(2)), ok),
			do(0, 6, 7, t0, set("a", model.Int(3)), ok),
			recoveredAt(8, a, nil, row(1), nil),
		}},
		{name: "a key the recovery does not name may take any row", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, set("a", model.Int(2)), ok),
			recoveredAt(7, []string{"b"}, nil, nil, nil),
			do(0, 10, 11, t0+1, get("a"), val(model.Int(1))),
		}},
		{name: "one order of concurrent commits leaves the recovered row", verdict: Ok, history: []Op{
			do(0, 1, 10, t0, incr("a"), n(1)),
			do(1, 1, 10, t0, incr("a"), n(2)),
			do(2, 1, 10, t0, set("a", model.Int(7)), ok),
			do(3, 1, 10, t0, incr("a"), n(3)),
			recoveredAt(11, a, nil, row(7), nil),
			do(0, 12, 13, t0+1, get("a"), val(model.Int(7))),
		}},
		{name: "no order of concurrent commits leaves the recovered row", verdict: Illegal, partition: "k:a", mentions: "power loss", history: []Op{
			do(0, 1, 10, t0, incr("a"), n(1)),
			do(1, 1, 10, t0, incr("a"), n(2)),
			do(2, 1, 10, t0, set("a", model.Int(7)), ok),
			recoveredAt(11, a, nil, row(8), nil),
		}},
		{name: "an unknown write may be what survived", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			unknown(1, 3, t0, set("a", model.Int(9))),
			recoveredAt(7, a, nil, row(9), nil),
		}},
		{name: "a NORMAL grant rolled back", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, lease("l", "o1"), token(1, t0+100)),
			recoveredAt(5, nil, []string{"l"}, nil, nil),
			full(do(1, 10, 11, t0+200, lease("l", "o2"), token(1, t0+300))),
		}},
		{name: "a FULL grant rolled back", verdict: Illegal, partition: "l:l", mentions: "power loss", history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o1"), token(1, t0+100))),
			recoveredAt(5, nil, []string{"l"}, nil, nil),
		}},
		{name: "a FULL grant recovered", verdict: Ok, history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o1"), token(1, t0+100))),
			recoveredAt(5, nil, []string{"l"}, nil, map[string]model.LeaseRow{"l": {Owner: "o1", Token: 1, ExpiresAt: t0 + 100}}),
		}},
		// The recorder names a key no call touched (a short run): the
		// only row it may recover to is absent.
		{name: "a key no call touched recovered absent", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			recoveredAt(5, []string{"a", "z"}, []string{"l"}, row(1), nil),
		}},
		{name: "a key no call touched recovered with a row", verdict: Illegal, partition: "k:z", mentions: "power loss", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			recoveredAt(5, []string{"a", "z"}, nil, map[string]model.Entry{"a": {Value: model.Int(1)}, "z": {Value: model.Int(5)}}, nil),
		}},
		{name: "a lease no call granted recovered with a row", verdict: Illegal, partition: "l:l", mentions: "power loss", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			recoveredAt(5, nil, []string{"l"}, nil, map[string]model.LeaseRow{"l": {Owner: "o1", Token: 3, ExpiresAt: t0 + 100}}),
		}},
		{name: "a key whose only call was refused recovered with a row", verdict: Illegal, partition: "k:z", mentions: "power loss", history: []Op{
			do(0, 1, 2, t0, model.Input{Kind: model.Set, Key: "z", Value: model.Bytes(strings.Repeat("x", 1<<20+1))}, model.Output{Err: model.ErrInvalid}),
			recoveredAt(5, []string{"z"}, nil, map[string]model.Entry{"z": {Value: model.Int(5)}}, nil),
		}},
		{name: "the recovery of each power loss holds its own era", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			recoveredAt(3, a, nil, row(1), nil),
			do(0, 4, 5, t0, set("a", model.Int(2)), ok),
			recoveredAt(6, a, nil, row(1), nil),
			do(0, 10, 11, t0+1, get("a"), val(model.Int(1))),
		}},
	})
}

func TestRecoveredOnlyOnAPowerLoss(t *testing.T) {
	op := do(0, 1, 2, t0, get("a"), notFound)
	op.Recovered = &Recovery{Keys: []string{"a"}}
	res := Check([]Op{op}, 0)
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "not a power loss")
}
