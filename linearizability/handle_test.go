package linearizability

import (
	"testing"

	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// on gives op a handle and the time it claimed its engine time at.
func on(handle int, claimed int64, op Op) Op {
	op.Handle, op.Claimed = handle, claimed
	return op
}

func TestHandleClaimOrder(t *testing.T) {
	// A Get that claimed t0 at 2, waited for the lock while a Set of its
	// handle claimed t0+5 at 4 and wrote, then ran at t0 and saw the
	// write: the order it needs (after the Set) puts its handle's time
	// back. Without the claims it passes.
	staleRead := []Op{
		do(0, 1, 8, t0, get("a"), val(model.Bytes("v"))),
		do(1, 3, 6, t0+5, set("a", model.Bytes("v")), ok),
	}
	res := Check(staleRead, 0)
	require.NoError(t, res.Err)
	require.Equal(t, Ok, res.Verdict, "without claims the stale read passes")

	claimedStale := []Op{on(1, 2, staleRead[0]), on(1, 4, staleRead[1])}
	// An unknown Set that claimed t0 at 2 took effect before a read
	// of its handle claimed t0+5 at 4 (which found nothing): a read at
	// t0+10, after, cannot see it.
	unknownSet := []Op{
		on(1, 2, unknown(0, 1, t0, set("a", model.Bytes("v")))),
		on(1, 4, do(1, 3, 5, t0+5, get("a"), notFound)),
		do(2, 6, 7, t0+10, get("a"), val(model.Bytes("v"))),
	}
	runChecks(t, []checkCase{
		{name: "a read that waited saw a write its handle made at a later time", verdict: Illegal, partition: "k:a",
			history: claimedStale, mentions: "get"},
		{name: "a read that waited and ran first", verdict: Ok, history: []Op{
			on(1, 2, do(0, 1, 8, t0, get("a"), notFound)),
			on(1, 4, do(1, 3, 6, t0+5, set("a", model.Bytes("v")), ok)),
		}},
		{name: "calls of two handles are ordered by their intervals only", verdict: Ok, history: []Op{
			on(1, 2, staleRead[0]), on(2, 4, staleRead[1]),
		}},
		{name: "calls at the same time are in either order", verdict: Ok, history: []Op{
			on(1, 2, do(0, 1, 8, t0+5, get("a"), val(model.Bytes("v")))),
			on(1, 4, staleRead[1]),
		}},
		{name: "an unknown write ends before a later time's claim", verdict: Illegal, partition: "k:a",
			history: unknownSet, mentions: "get"},
		{name: "an unknown write without claims may land after", verdict: Ok, history: []Op{
			unknown(0, 1, t0, set("a", model.Bytes("v"))),
			do(1, 3, 5, t0+5, get("a"), notFound),
			do(2, 6, 7, t0+10, get("a"), val(model.Bytes("v"))),
		}},
		{name: "a call takes effect no earlier than its claim", verdict: Illegal, partition: "k:a", mentions: "get",
			history: []Op{
				// The Get claimed at 5, after the Set returned: it
				// cannot read what was there before.
				on(1, 5, do(0, 1, 6, t0+5, get("a"), notFound)),
				do(1, 2, 4, t0, set("a", model.Bytes("v")), ok),
			}},
	})

	// A handle that claimed a later time first, then an earlier one:
	// its time went back.
	res = Check([]Op{
		on(1, 2, do(0, 1, 8, t0+5, get("a"), notFound)),
		on(1, 4, do(1, 3, 6, t0, get("b"), notFound)),
	}, 0)
	require.NoError(t, res.Err)
	assert.Equal(t, Illegal, res.Verdict)
	assert.Contains(t, res.Description, "its time went back")
}

func TestMalformedClaims(t *testing.T) {
	for _, c := range []struct {
		name string
		op   Op
		want string
	}{
		{"without a handle", on(0, 2, do(0, 1, 3, t0, get("a"), notFound)), "without a handle"},
		{"before the call", on(1, 1, do(0, 2, 3, t0, get("a"), notFound)), "before its call"},
		{"after the return", on(1, 4, do(0, 2, 3, t0, get("a"), notFound)), "after its return"},
		{"after an unknown's end", on(1, 6, Op{Client: 0, Input: set("a", model.Int(1)), Call: 2, Return: 5, Unknown: true}), "after its return"},
		{"on an event", Op{Event: Durable, Call: 1, Return: 2, Handle: 1}, "no call"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := Check([]Op{c.op}, 0)
			require.Error(t, res.Err)
			assert.Contains(t, res.Err.Error(), c.want)
		})
	}
	// A claim at or after the power loss that ended its call's process.
	res := Check([]Op{on(1, 9, unknown(0, 2, t0, set("a", model.Int(1)))), PowerLossAt(8)}, 0)
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "at or after the power loss")
}
