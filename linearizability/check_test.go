package linearizability

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const t0 = int64(1_000_000) // engine time of the first op, unix ms

// do records a known call by client c over [call, ret] at engine time now.
func do(c int, call, ret, now int64, in model.Input, out model.Output) Op {
	in.NowMillis = now
	return Op{Client: c, Input: in, Output: out, Call: call, Return: ret}
}

// full marks op as committed with synchronous=FULL.
func full(op Op) Op {
	op.Durability = Full
	return op
}

// unknown records a call by client c at call whose outcome was hidden.
func unknown(c int, call, now int64, in model.Input) Op {
	in.NowMillis = now
	return Op{Client: c, Input: in, Call: call, Unknown: true}
}

func set(k string, v model.Value) model.Input { return model.Input{Kind: model.Set, Key: k, Value: v} }
func get(k string) model.Input                { return model.Input{Kind: model.Get, Key: k} }
func incr(k string) model.Input               { return model.Input{Kind: model.IncrBy, Key: k, Delta: 1} }
func lease(name, owner string) model.Input {
	return model.Input{Kind: model.Lease, Key: name, Owner: owner, TTLMillis: 100}
}

var (
	ok       = model.Output{}
	notFound = model.Output{Err: model.ErrNotFound}
)

func val(v model.Value) model.Output { return model.Output{Value: v} }
func n(i int64) model.Output         { return model.Output{Int: i} }
func token(tok, exp int64) model.Output {
	return model.Output{Token: tok, ExpiresAt: exp}
}

type checkCase struct {
	name      string
	history   []Op
	verdict   Verdict
	partition string // of an Illegal verdict
	mentions  string // a substring of the description of an Illegal verdict
}

func runChecks(t *testing.T, cases []checkCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Check(c.history, 10*time.Second)
			require.NoError(t, res.Err)
			require.Equal(t, c.verdict, res.Verdict, "%s\n%s", res, res.Description)
			if c.verdict == Illegal {
				assert.Equal(t, c.partition, res.Partition)
				assert.Contains(t, res.Description, c.mentions)
			}
		})
	}
}

func TestRegisterHistories(t *testing.T) {
	runChecks(t, []checkCase{
		{name: "sequential", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(1, 3, 4, t0, get("a"), val(model.Int(1))),
			do(0, 5, 6, t0, incr("a"), n(2)),
			do(1, 7, 8, t0, get("a"), val(model.Int(2))),
		}},
		{name: "stale read", verdict: Illegal, partition: "k:a", mentions: `get("a")`, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, set("a", model.Int(2)), ok),
			do(1, 5, 6, t0, get("a"), val(model.Int(1))),
		}},
		{name: "concurrent read may see the old value", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 8, t0, set("a", model.Int(2)), ok),
			do(1, 4, 5, t0, get("a"), val(model.Int(1))),
			do(1, 6, 7, t0, get("a"), val(model.Int(2))),
		}},
		{name: "a read cannot go back once it saw the new value", verdict: Illegal, partition: "k:a", mentions: "spec: 2", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 8, t0, set("a", model.Int(2)), ok),
			do(1, 4, 5, t0, get("a"), val(model.Int(2))),
			do(2, 6, 7, t0, get("a"), val(model.Int(1))),
		}},
		{name: "int is not bytes", verdict: Illegal, partition: "k:a", mentions: `get("a")`, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(7)), ok),
			do(1, 3, 4, t0, get("a"), val(model.Bytes("7"))),
		}},
		{name: "lost increment", verdict: Illegal, partition: "k:c", mentions: `incrby("c", +1)`, history: []Op{
			do(0, 1, 5, t0, incr("c"), n(1)),
			do(1, 2, 6, t0, incr("c"), n(1)),
		}},
		{name: "concurrent increments", verdict: Ok, history: []Op{
			do(0, 1, 5, t0, incr("c"), n(2)),
			do(1, 2, 6, t0, incr("c"), n(1)),
			do(2, 7, 8, t0, get("c"), val(model.Int(2))),
		}},
		{name: "expired by engine time", verdict: Illegal, partition: "k:a", mentions: "not_found", history: []Op{
			do(0, 1, 2, t0, model.Input{Kind: model.Set, Key: "a", Value: model.Int(1), TTLMillis: 10}, ok),
			do(1, 3, 4, t0+10, get("a"), val(model.Int(1))),
		}},
		{name: "a process with an earlier clock still sees it live", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, model.Input{Kind: model.Set, Key: "a", Value: model.Int(1), TTLMillis: 10}, ok),
			do(1, 3, 4, t0+10, get("a"), notFound),
			do(2, 5, 6, t0+9, get("a"), val(model.Int(1))),
		}},
		{name: "partitions are checked in sorted order", verdict: Illegal, partition: "k:a", mentions: `get("a")`, history: []Op{
			do(0, 1, 2, t0, get("b"), val(model.Int(1))),
			do(0, 3, 4, t0, get("a"), val(model.Int(1))),
		}},
	})
}

func TestLeaseHistories(t *testing.T) {
	runChecks(t, []checkCase{
		{name: "grant, expire, next token", verdict: Ok, history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o1"), token(1, t0+100))),
			do(1, 3, 4, t0+50, lease("l", "o2"), model.Output{Err: model.ErrLeaseHeld, Owner: "o1", ExpiresAt: t0 + 100}),
			full(do(1, 5, 6, t0+100, lease("l", "o2"), token(2, t0+200))),
		}},
		{name: "duplicate token", verdict: Illegal, partition: "l:l", mentions: `lease("l", "o2", 100ms)`, history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o1"), token(1, t0+100))),
			full(do(1, 5, 6, t0+100, lease("l", "o2"), token(1, t0+200))),
		}},
		{name: "two holders at once", verdict: Illegal, partition: "l:l", mentions: "lease_held", history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o1"), token(1, t0+100))),
			full(do(1, 3, 4, t0+10, lease("l", "o2"), token(2, t0+110))),
		}},
		{name: "token after release", verdict: Ok, history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o1"), token(1, t0+100))),
			full(do(0, 3, 4, t0+1, model.Input{Kind: model.Release, Key: "l", Owner: "o1", Token: 1}, ok)),
			full(do(1, 5, 6, t0+2, lease("l", "o1"), token(2, t0+102))),
			full(do(0, 7, 8, t0+3, model.Input{Kind: model.Renew, Key: "l", Owner: "o1", Token: 1, TTLMillis: 100}, model.Output{Err: model.ErrLeaseLost})),
		}},
		{name: "release deleting the row restarts tokens", verdict: Illegal, partition: "l:l", mentions: "#1", history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o1"), token(1, t0+100))),
			full(do(0, 3, 4, t0+1, model.Input{Kind: model.Release, Key: "l", Owner: "o1", Token: 1}, ok)),
			full(do(1, 5, 6, t0+2, lease("l", "o2"), token(1, t0+102))),
		}},
		{name: "lease and key namespaces are separate", verdict: Ok, history: []Op{
			full(do(0, 1, 2, t0, lease("x", "o1"), token(1, t0+100))),
			do(1, 3, 4, t0, get("x"), notFound),
		}},
	})
}

func TestPowerLossHistories(t *testing.T) {
	runChecks(t, []checkCase{
		{name: "NORMAL write rolled back", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			PowerLossAt(5),
			do(0, 10, 11, t0+1, get("a"), notFound),
		}},
		{name: "NORMAL write kept", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			PowerLossAt(5),
			do(0, 10, 11, t0+1, get("a"), val(model.Int(1))),
		}},
		{name: "a prefix survives", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, set("a", model.Int(2)), ok),
			do(0, 5, 6, t0, set("a", model.Int(3)), ok),
			PowerLossAt(7),
			do(0, 10, 11, t0+1, get("a"), val(model.Int(2))),
		}},
		{name: "a commit between two power losses can be rolled back by the second", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			PowerLossAt(5),
			do(0, 10, 11, t0+1, set("a", model.Int(2)), ok),
			PowerLossAt(15),
			do(0, 20, 21, t0+2, get("a"), val(model.Int(1))),
		}},
		{name: "after the last power loss nothing rolls back", verdict: Illegal, partition: "k:a", mentions: "spec: 2", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			PowerLossAt(5),
			do(0, 10, 11, t0+1, set("a", model.Int(2)), ok),
			do(0, 12, 13, t0+1, incr("b"), n(1)),
			do(0, 14, 15, t0+1, get("a"), val(model.Int(1))),
		}},
		{name: "nothing never written survives", verdict: Illegal, partition: "k:a", mentions: "power loss", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, set("a", model.Int(2)), ok),
			PowerLossAt(7),
			do(0, 10, 11, t0+1, get("a"), val(model.Int(3))),
		}},
		{name: "after recovery the rolled-back state stays", verdict: Illegal, partition: "k:a", mentions: "spec: not_found", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			PowerLossAt(5),
			do(0, 10, 11, t0+1, get("a"), notFound),
			do(0, 12, 13, t0+1, get("a"), val(model.Int(1))),
		}},
		{name: "FULL write rolled back", verdict: Illegal, partition: "k:a", mentions: "power loss", history: []Op{
			full(do(0, 1, 2, t0, set("a", model.Int(1)), ok)),
			PowerLossAt(5),
			do(0, 10, 11, t0+1, get("a"), notFound),
		}},
		{name: "FULL grant rolled back hands the token out twice", verdict: Illegal, partition: "l:l", mentions: "power loss", history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o1"), token(1, t0+100))),
			PowerLossAt(5),
			full(do(1, 10, 11, t0+200, lease("l", "o2"), token(1, t0+300))),
		}},
		{name: "NORMAL grant rolled back is allowed by the model", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, lease("l", "o1"), token(1, t0+100)),
			PowerLossAt(5),
			full(do(1, 10, 11, t0+200, lease("l", "o2"), token(1, t0+300))),
		}},
		{name: "FULL commit makes earlier NORMAL ones durable", verdict: Illegal, partition: "k:a", mentions: "power loss", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			full(do(0, 3, 4, t0, set("a", model.Int(2)), ok)),
			do(0, 5, 6, t0, set("a", model.Int(3)), ok),
			PowerLossAt(7),
			do(0, 10, 11, t0+1, get("a"), val(model.Int(1))),
		}},
		{name: "FULL commit on another key is a durable point", verdict: Illegal, partition: "k:a", mentions: "FULL commit of #1", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			full(do(1, 3, 4, t0, lease("l", "o1"), token(1, t0+100))),
			PowerLossAt(5),
			do(0, 10, 11, t0+1, get("a"), notFound),
		}},
		{name: "a failed FULL grant commits nothing", verdict: Ok, history: []Op{
			full(do(1, 1, 2, t0, lease("l", "o1"), token(1, t0+100))),
			do(0, 3, 4, t0, set("a", model.Int(1)), ok),
			full(do(2, 5, 6, t0, lease("l", "o2"), model.Output{Err: model.ErrLeaseHeld})),
			PowerLossAt(7),
			do(0, 10, 11, t0+1, get("a"), notFound),
		}},
		{name: "rolled back past a Durable event", verdict: Illegal, partition: "k:a", mentions: "durable point", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			DurableWithin(3, 4),
			PowerLossAt(5),
			do(0, 10, 11, t0+1, get("a"), notFound),
		}},
		{name: "a Durable event concurrent with the write may precede it", verdict: Ok, history: []Op{
			do(0, 1, 4, t0, set("a", model.Int(1)), ok),
			DurableWithin(2, 3),
			PowerLossAt(5),
			do(0, 10, 11, t0+1, get("a"), notFound),
		}},
		{name: "a Durable event before the write does not hold it", verdict: Ok, history: []Op{
			DurableWithin(0, 0),
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			PowerLossAt(5),
			do(0, 10, 11, t0+1, get("a"), notFound),
		}},
		{name: "two power losses", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			PowerLossAt(3),
			do(0, 4, 5, t0, get("a"), val(model.Int(1))),
			do(0, 6, 7, t0, set("a", model.Int(2)), ok),
			PowerLossAt(8),
			do(0, 10, 11, t0+1, get("a"), val(model.Int(1))),
		}},
		{name: "what survived a power loss is durable", verdict: Illegal, partition: "k:a", mentions: "power loss", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			PowerLossAt(3),
			do(0, 4, 5, t0, get("a"), val(model.Int(1))),
			PowerLossAt(8),
			do(0, 10, 11, t0+1, get("a"), notFound),
		}},
	})
}

func TestUnknownHistories(t *testing.T) {
	// A call in flight at a power loss cannot take effect after it; at a
	// loss the processes survived (Op.Survived: a file system dropped a
	// failed sync's writes) it can: here only after c2's set.
	acrossLoss := func(loss Op) []Op {
		return []Op{
			full(do(0, 1, 2, t0, set("c", model.Int(10)), ok)),
			unknown(1, 3, t0, incr("c")),
			loss,
			full(do(2, 6, 7, t0, set("c", model.Int(20)), ok)),
			do(3, 10, 11, t0, get("c"), val(model.Int(21))),
		}
	}
	runChecks(t, []checkCase{
		{name: "unknown after a survived loss", verdict: Ok, history: acrossLoss(SurvivedLossAt(5))},
		{name: "unknown not after a power loss", verdict: Illegal, partition: "k:c", mentions: "spec: 20", history: acrossLoss(PowerLossAt(5))},
		{name: "unknown applied", verdict: Ok, history: []Op{
			unknown(0, 1, t0, incr("c")),
			do(1, 5, 6, t0, get("c"), val(model.Int(1))),
		}},
		{name: "unknown not applied", verdict: Ok, history: []Op{
			unknown(0, 1, t0, incr("c")),
			do(1, 5, 6, t0, get("c"), notFound),
		}},
		{name: "unknown applied late", verdict: Ok, history: []Op{
			unknown(0, 1, t0, incr("c")),
			do(1, 5, 6, t0, get("c"), notFound),
			do(1, 7, 8, t0, get("c"), val(model.Int(1))),
		}},
		{name: "unknown applied once only", verdict: Illegal, partition: "k:c", mentions: "unknown", history: []Op{
			unknown(0, 1, t0, incr("c")),
			do(1, 5, 6, t0, get("c"), val(model.Int(2))),
		}},
		{name: "unknown cannot be undone without a power loss", verdict: Illegal, partition: "k:c", mentions: "spec: 1", history: []Op{
			unknown(0, 1, t0, incr("c")),
			do(1, 5, 6, t0, get("c"), val(model.Int(1))),
			do(1, 7, 8, t0, get("c"), notFound),
		}},
		{name: "unknown NORMAL write lost in a power loss", verdict: Ok, history: []Op{
			unknown(0, 1, t0, incr("c")),
			do(1, 2, 3, t0, get("c"), val(model.Int(1))),
			PowerLossAt(5),
			do(1, 7, 8, t0, get("c"), notFound),
		}},
		{name: "unknown call cannot take effect after the power loss", verdict: Illegal, partition: "k:c", mentions: "spec: not_found", history: []Op{
			unknown(0, 1, t0, incr("c")),
			PowerLossAt(5),
			do(1, 7, 8, t0, get("c"), notFound),
			do(1, 9, 10, t0, get("c"), val(model.Int(1))),
		}},
		{name: "unknown call ended when its process was seen dead", verdict: Illegal, partition: "k:c", mentions: "spec: not_found", history: []Op{
			{Client: 0, Input: model.Input{Kind: model.IncrBy, Key: "c", Delta: 1, NowMillis: t0}, Call: 1, Return: 4, Unknown: true},
			do(1, 5, 6, t0, get("c"), notFound),
			do(1, 7, 8, t0, get("c"), val(model.Int(1))),
		}},
		{name: "unknown call may end any time before its process was seen dead", verdict: Ok, history: []Op{
			{Client: 0, Input: model.Input{Kind: model.IncrBy, Key: "c", Delta: 1, NowMillis: t0}, Call: 1, Return: 8, Unknown: true},
			do(1, 5, 6, t0, get("c"), notFound),
			do(1, 7, 8, t0, get("c"), val(model.Int(1))),
		}},
		{name: "unknown FULL write that was seen is durable", verdict: Illegal, partition: "l:l", mentions: "power loss", history: []Op{
			full(unknown(0, 1, t0, lease("l", "o1"))),
			do(1, 2, 3, t0+1, model.Input{Kind: model.Lease, Key: "l", Owner: "o2", TTLMillis: 100}, model.Output{Err: model.ErrLeaseHeld, Owner: "o1", ExpiresAt: t0 + 100}),
			PowerLossAt(5),
			full(do(1, 7, 8, t0+2, lease("l", "o2"), token(1, t0+102))),
		}},
		// A store that reports each call's time with its answer (Redis):
		// a lost answer leaves a window of times the call may have run at.
		{name: "unknown time outside its estimate is illegal", verdict: Illegal, partition: "l:l", mentions: "lease_held", history: []Op{
			unknown(0, 1, t0, lease("l", "o1")),
			do(1, 5, 6, t0+5, model.Input{Kind: model.Lease, Key: "l", Owner: "o2", TTLMillis: 100}, model.Output{Err: model.ErrLeaseHeld, Owner: "o1", ExpiresAt: t0 + 103}),
		}},
		{name: "unknown time within its window", verdict: Ok, history: []Op{
			func() Op { op := unknown(0, 1, t0, lease("l", "o1")); op.NowLatest = t0 + 4; return op }(),
			do(1, 5, 6, t0+5, model.Input{Kind: model.Lease, Key: "l", Owner: "o2", TTLMillis: 100}, model.Output{Err: model.ErrLeaseHeld, Owner: "o1", ExpiresAt: t0 + 103}),
			do(1, 7, 8, t0+6, model.Input{Kind: model.Lease, Key: "l", Owner: "o2", TTLMillis: 100}, model.Output{Err: model.ErrLeaseHeld, Owner: "o1", ExpiresAt: t0 + 103}),
		}},
		{name: "unknown time is one time, not several", verdict: Illegal, partition: "l:l", mentions: "lease_held", history: []Op{
			func() Op { op := unknown(0, 1, t0, lease("l", "o1")); op.NowLatest = t0 + 4; return op }(),
			do(1, 5, 6, t0+5, model.Input{Kind: model.Lease, Key: "l", Owner: "o2", TTLMillis: 100}, model.Output{Err: model.ErrLeaseHeld, Owner: "o1", ExpiresAt: t0 + 103}),
			do(1, 7, 8, t0+6, model.Input{Kind: model.Lease, Key: "l", Owner: "o2", TTLMillis: 100}, model.Output{Err: model.ErrLeaseHeld, Owner: "o1", ExpiresAt: t0 + 101}),
		}},
		{name: "unknown time beyond its window is illegal", verdict: Illegal, partition: "l:l", mentions: "lease_held", history: []Op{
			func() Op { op := unknown(0, 1, t0, lease("l", "o1")); op.NowLatest = t0 + 2; return op }(),
			do(1, 5, 6, t0+5, model.Input{Kind: model.Lease, Key: "l", Owner: "o2", TTLMillis: 100}, model.Output{Err: model.ErrLeaseHeld, Owner: "o1", ExpiresAt: t0 + 103}),
		}},
		{name: "unknown FULL write may not have happened", verdict: Ok, history: []Op{
			full(unknown(0, 1, t0, lease("l", "o1"))),
			PowerLossAt(5),
			full(do(1, 7, 8, t0+2, lease("l", "o2"), token(1, t0+102))),
		}},
	})
}

func TestMultiKeyHistories(t *testing.T) {
	del := func(keys ...string) model.Input { return model.Input{Kind: model.Del, Keys: keys} }
	runChecks(t, []checkCase{
		{name: "del counts live keys", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, set("b", model.Int(1)), ok),
			do(0, 5, 6, t0, del("a", "b", "a"), model.Output{N: 2}),
			do(0, 7, 8, t0, get("a"), notFound),
		}},
		{name: "del of no keys answers 0", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, del(), model.Output{N: 0}),
		}},
		{name: "del of no keys answering more", verdict: Illegal, partition: "", mentions: "a del of no keys", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, del(), model.Output{N: 3}),
		}},
		{name: "del of nothing live answers 0", verdict: Illegal, partition: "k:b", mentions: "del", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 5, 6, t0, del("a", "b"), model.Output{N: 2}),
		}},
		{name: "del answering 0 must find nothing", verdict: Illegal, partition: "k:a", mentions: "del", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 5, 6, t0, del("a", "b"), model.Output{N: 0}),
		}},
		{name: "del with a partial count still deletes", verdict: Illegal, partition: "k:b", mentions: `get("b")`, history: []Op{
			do(0, 1, 2, t0, set("b", model.Int(1)), ok),
			do(0, 5, 6, t0, del("a", "b"), model.Output{N: 1}),
			do(0, 7, 8, t0, get("b"), val(model.Int(1))),
		}},
		{name: "aborted update changes nothing", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("s", model.Bytes("x")), ok),
			do(0, 3, 4, t0, model.Input{Kind: model.Update, Ops: []model.Input{incr("a"), incr("s")}},
				model.Output{Err: model.ErrNotInteger, Sub: []model.Output{n(1), {Err: model.ErrNotInteger}}}),
			do(0, 5, 6, t0, get("a"), notFound),
		}},
		{name: "aborted update applied in another key", verdict: Illegal, partition: "k:a", mentions: `get("a")`, history: []Op{
			do(0, 1, 2, t0, set("s", model.Bytes("x")), ok),
			do(0, 3, 4, t0, model.Input{Kind: model.Update, Ops: []model.Input{incr("a"), incr("s")}},
				model.Output{Err: model.ErrNotInteger, Sub: []model.Output{n(1), {Err: model.ErrNotInteger}}}),
			do(0, 5, 6, t0, get("a"), val(model.Int(1))),
		}},
		{name: "update aborting where the spec would not", verdict: Illegal, partition: "k:s", mentions: "update", history: []Op{
			do(0, 1, 2, t0, set("s", model.Int(1)), ok),
			do(0, 3, 4, t0, model.Input{Kind: model.Update, Ops: []model.Input{incr("a"), incr("s")}},
				model.Output{Err: model.ErrNotInteger, Sub: []model.Output{n(1), {Err: model.ErrNotInteger}}}),
		}},
		{name: "callback abort", verdict: Ok, history: []Op{
			do(0, 3, 4, t0, model.Input{Kind: model.Update, Abort: true, Ops: []model.Input{incr("a"), get("b")}},
				model.Output{Err: model.ErrAborted, Sub: []model.Output{n(1), notFound}}),
			do(0, 5, 6, t0, get("a"), notFound),
		}},
		// Only a callback that aborted makes an Update answer ErrAborted:
		// one answered so without it is wrong in every partition, not a
		// rollback by another's.
		{name: "update answered aborted where the callback did not abort", verdict: Illegal, partition: "k:a", mentions: "update", history: []Op{
			do(0, 1, 2, t0, model.Input{Kind: model.Update, Ops: []model.Input{set("a", model.Int(1))}},
				model.Output{Err: model.ErrAborted, Sub: []model.Output{ok}}),
			do(0, 3, 4, t0, get("a"), notFound),
		}},
		{name: "update answered as committed where the callback aborted", verdict: Illegal, partition: "k:a", mentions: "update", history: []Op{
			do(0, 3, 4, t0, model.Input{Kind: model.Update, Abort: true, Ops: []model.Input{incr("a"), get("b")}},
				model.Output{Sub: []model.Output{n(1), notFound}}),
		}},
		{name: "update sub-answers are checked", verdict: Illegal, partition: "k:b", mentions: "update", history: []Op{
			do(0, 1, 2, t0, set("b", model.Int(5)), ok),
			do(0, 3, 4, t0, model.Input{Kind: model.Update, Ops: []model.Input{incr("a"), get("b")}},
				model.Output{Sub: []model.Output{n(1), val(model.Int(6))}}),
		}},
		{name: "flush applies every delta", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, model.Input{Kind: model.Flush, Ops: []model.Input{
				{Kind: model.IncrBy, Key: "a", Delta: 3}, {Kind: model.IncrBy, Key: "b", Delta: 2}}}, ok),
			do(1, 3, 4, t0, get("a"), val(model.Int(3))),
			do(1, 5, 6, t0, get("b"), val(model.Int(2))),
		}},
		{name: "flush lost a delta", verdict: Illegal, partition: "k:b", mentions: `get("b")`, history: []Op{
			do(0, 1, 2, t0, model.Input{Kind: model.Flush, Ops: []model.Input{
				{Kind: model.IncrBy, Key: "a", Delta: 3}, {Kind: model.IncrBy, Key: "b", Delta: 2}}}, ok),
			do(1, 5, 6, t0, get("b"), notFound),
		}},
		{name: "sweep deletes what a slower clock still saw live", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, model.Input{Kind: model.Set, Key: "a", Value: model.Int(1), TTLMillis: 10}, ok),
			do(0, 3, 4, t0+20, model.Input{Kind: model.Sweep}, model.Output{N: 1}),
			do(1, 5, 6, t0+5, get("a"), notFound),
		}},
		{name: "sweep answering 0 left an expired key", verdict: Illegal, partition: "k:a", mentions: "sweep", history: []Op{
			do(0, 1, 2, t0, model.Input{Kind: model.Set, Key: "a", Value: model.Int(1), TTLMillis: 10}, ok),
			do(0, 3, 4, t0+20, model.Input{Kind: model.Sweep}, model.Output{N: 0}),
		}},
		{name: "sweep deleting a live key", verdict: Illegal, partition: "k:a", mentions: `get("a")`, history: []Op{
			do(0, 1, 2, t0, model.Input{Kind: model.Set, Key: "a", Value: model.Int(1), TTLMillis: 10}, ok),
			do(0, 3, 4, t0+5, model.Input{Kind: model.Sweep}, model.Output{N: 1}),
			do(1, 5, 6, t0+6, get("a"), notFound),
		}},
	})
}

func TestRefusedInput(t *testing.T) {
	runChecks(t, []checkCase{
		{name: "refusal the spec agrees with is left out", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, model.Input{Kind: model.Del, Keys: []string{"a", ""}}, model.Output{Err: model.ErrInvalid}),
			do(0, 3, 4, t0, model.Input{Kind: model.Lease, Key: "l", Owner: "o"}, model.Output{Err: model.ErrInvalid}),
		}},
		{name: "refusal of valid input", verdict: Illegal, partition: "", mentions: "#1", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, get("a"), model.Output{Err: model.ErrInvalid}),
		}},
		// The CAS below is refused (a TTL with a nil new value) only once
		// the renew before it succeeds: on a lease not held, the Update
		// answers lease_lost. Whether a refusal is right depends on the
		// state, so the model checks it.
		{name: "update refused by a sub-input it reached", verdict: Ok, history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o"), token(1, t0+100))),
			do(0, 3, 4, t0, renewThenBadCAS(), model.Output{Err: model.ErrInvalid,
				Sub: []model.Output{{ExpiresAt: t0 + 100}, {Err: model.ErrInvalid}}}),
		}},
		// A Del the spec refuses for one of its keys deletes none: the
		// Update it ends leaves its other keys as they were.
		{name: "update refused by a del of a bad key", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, model.Input{Kind: model.Update, Ops: []model.Input{incr("a"), delKeys("a", "")}},
				model.Output{Err: model.ErrInvalid, Sub: []model.Output{n(2), {Err: model.ErrInvalid}}}),
			do(0, 5, 6, t0, get("a"), val(model.Int(1))),
		}},
		{name: "update refused by a del of a bad key deleted a good one", verdict: Illegal, partition: "k:a", mentions: `get("a")`, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, model.Input{Kind: model.Update, Ops: []model.Input{delKeys("a", "")}},
				model.Output{Err: model.ErrInvalid, Sub: []model.Output{{Err: model.ErrInvalid}}}),
			do(0, 5, 6, t0, get("a"), notFound),
		}},
		{name: "a lost call the spec refuses took no effect", verdict: Illegal, partition: "k:a", mentions: `get("a")`, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			unknown(0, 3, t0, delKeys("a", "")),
			do(1, 5, 6, t0, get("a"), notFound),
		}},
		{name: "update refused by a sub-input it cannot reach", verdict: Illegal, partition: "l:l", mentions: "#0", history: []Op{
			do(0, 1, 2, t0, renewThenBadCAS(), model.Output{Err: model.ErrInvalid,
				Sub: []model.Output{{ExpiresAt: t0 + 100}, {Err: model.ErrInvalid}}}),
		}},
	})
}

// delKeys is a Del of keys.
func delKeys(keys ...string) model.Input { return model.Input{Kind: model.Del, Keys: keys} }

// renewThenBadCAS is an Update that renews lease l for owner o, token 1,
// then runs a CAS the spec refuses.
func renewThenBadCAS() model.Input {
	return model.Input{Kind: model.Update, Ops: []model.Input{
		{Kind: model.Renew, Key: "l", Owner: "o", Token: 1, TTLMillis: 100},
		{Kind: model.CAS, Key: "l", Expected: model.Ptr(model.Int(2)), TTLMillis: 25},
	}}
}

func TestMalformed(t *testing.T) {
	res := Check([]Op{do(0, 5, 4, t0, get("a"), notFound)}, 0)
	assert.Equal(t, Unknown, res.Verdict)
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "returns before its call")

	res = Check([]Op{{Input: model.Input{Kind: 77}}}, 0)
	require.Error(t, res.Err)
	res = Check([]Op{do(0, 1, 2, t0, model.Input{Kind: model.Update, Ops: []model.Input{get("a")}},
		model.Output{Sub: []model.Output{notFound, notFound}})}, 0)
	require.Error(t, res.Err)
	res = Check([]Op{{Event: 9}}, 0)
	require.Error(t, res.Err)
	res = Check([]Op{do(0, 1, 2, t0, model.Input{Kind: model.Update, Ops: []model.Input{get("a"), get("b")}},
		model.Output{Sub: []model.Output{notFound}})}, 0)
	require.Error(t, res.Err, "a committed update answers every sub-input")
	res = Check([]Op{do(0, 1, 2, t0, model.Input{Kind: model.Update, Ops: []model.Input{incr("a")}},
		model.Output{Err: model.ErrNotInteger})}, 0)
	require.Error(t, res.Err, "a failed update answers the failing sub-input")
	// Refused by a sub-input it reached, so it answers that sub-input;
	// left without, it would be checked against nothing (the renew
	// before it fails on a lease not held).
	res = Check([]Op{do(0, 1, 2, t0, renewThenBadCAS(), model.Output{Err: model.ErrInvalid})}, 0)
	require.Error(t, res.Err, "an update refused by a sub-input answers the sub-input")
	assert.Contains(t, res.Err.Error(), "0 sub-outputs")
	res = Check([]Op{do(0, 1, 2, t0, model.Input{Kind: model.Update, Ops: []model.Input{{Kind: model.Flush}}},
		model.Output{Err: model.ErrInvalid})}, 0)
	require.NoError(t, res.Err, "an update the spec refuses before any sub-input answers none")
	require.Equal(t, Ok, res.Verdict, res.Description)
	// A power loss over an interval could be placed after the calls of
	// the reboot and roll them back: here the Set at 15, made durable at
	// 20, read as lost after the power loss at 60.
	res = Check([]Op{
		{Event: PowerLoss, Call: 10, Return: 40},
		do(0, 15, 16, t0, set("a", model.Int(1)), ok),
		do(0, 17, 18, t0, get("a"), val(model.Int(1))),
		DurableWithin(20, 20),
		PowerLossAt(60),
		do(0, 70, 71, t0, get("a"), notFound),
	}, 0)
	require.Error(t, res.Err, "a power loss is an instant")
	assert.Contains(t, res.Err.Error(), "(power loss at 10) returns at 40")
	res = Check([]Op{do(0, 1, 9, t0, get("a"), notFound), PowerLossAt(5)}, 0)
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "record it as unknown")
	// A power loss is an instant no call or return shares: intervals are
	// closed, so one that touched it would be concurrent with it, and a
	// Set called at it could be taken back by it, a read answered at it
	// judged after it.
	res = Check([]Op{do(0, 1, 4, t0, get("a"), notFound), PowerLossAt(5), do(0, 6, 7, t0, get("a"), notFound)}, 0)
	require.NoError(t, res.Err, "up to the power loss, and from just after it")
	res = Check([]Op{PowerLossAt(5), do(0, 5, 6, t0, set("a", model.Int(1)), ok), do(0, 7, 8, t0, get("a"), notFound)}, 0)
	require.Error(t, res.Err, "a Set called at the loss's instant, taken back by it")
	assert.Contains(t, res.Err.Error(), "called at the instant of the power loss at 5")
	res = Check([]Op{do(0, 1, 2, t0, set("a", model.Int(1)), ok), do(1, 3, 5, t0, get("a"), notFound), PowerLossAt(5)}, 0)
	require.Error(t, res.Err, "a read answered at the loss's instant, judged after it")
	assert.Contains(t, res.Err.Error(), "returns at or after the power loss at 5")
	res = Check([]Op{do(0, 1, 9, t0, get("a"), notFound), SurvivedLossAt(5)}, 0)
	require.NoError(t, res.Err, "a known outcome across a loss the processes survived")
	res = Check([]Op{{Input: get("a"), Output: notFound, Call: 1, Return: 2, Survived: true}}, 0)
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "survived on an op that is not a power loss")
	survived := SurvivedLossAt(5)
	survived.Recovered = &Recovery{Keys: []string{"a"}}
	res = Check([]Op{survived}, 0)
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "nothing recovered")
}

func TestDescriptionIsDeterministic(t *testing.T) {
	history := []Op{
		do(0, 1, 10, t0, incr("c"), n(1)),
		do(1, 2, 11, t0, incr("c"), n(1)),
		do(2, 3, 12, t0, incr("c"), n(3)),
		do(3, 4, 13, t0, get("c"), val(model.Int(7))),
		do(4, 4, 13, t0, get("d"), notFound),
	}
	first := Check(history, 0)
	require.Equal(t, Illegal, first.Verdict)
	for range 5 {
		again := Check(history, 0)
		assert.Equal(t, first.Description, again.Description)
		assert.Equal(t, first.Partition, again.Partition)
	}
	assert.Equal(t, 2, first.Partitions)
	assert.Equal(t, 5, first.Operations)
	assert.Contains(t, first.String(), "Illegal in partition k:c")
}

func TestWriteHTML(t *testing.T) {
	dir := t.TempDir()
	good := Check([]Op{do(0, 1, 2, t0, set("a", model.Int(1)), ok)}, 0)
	require.True(t, good.Ok())
	assert.ErrorIs(t, good.WriteHTML(filepath.Join(dir, "none.html")), ErrNoFailure)

	bad := Check([]Op{
		do(0, 1, 2, t0, set("a", model.Int(1)), ok),
		PowerLossAt(3),
		do(1, 4, 5, t0, get("a"), val(model.Int(2))),
	}, 0)
	require.Equal(t, Illegal, bad.Verdict)
	path := filepath.Join(dir, "fail.html")
	require.NoError(t, bad.WriteHTML(path))
	html, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(html), `get(\"a\")`) || strings.Contains(string(html), `get(&#34;a&#34;)`) ||
		strings.Contains(string(html), `get(\u0022a\u0022)`), "the view names the failing read")
	assert.Contains(t, string(html), "power loss")
}

// Check reports how long its slowest partition took, and which it was: what
// a run's margin under the time limit is read from.
func TestCheckReportsItsSlowestPartition(t *testing.T) {
	res := Check([]Op{
		do(0, 1, 2, t0, set("a", model.Int(1)), ok),
		do(1, 1, 4, t0, incr("b"), n(1)),
		do(0, 3, 6, t0, get("a"), val(model.Int(1))),
		do(1, 5, 8, t0, incr("b"), n(2)),
	}, time.Minute)
	require.Equal(t, Ok, res.Verdict, res.Description)
	assert.Contains(t, []string{"k:a", "k:b"}, res.SlowestPartition)
	assert.Positive(t, res.Slowest)

	empty := Check(nil, time.Minute)
	assert.Empty(t, empty.SlowestPartition, "no partition, none slowest")
	assert.Zero(t, empty.Slowest)
}
