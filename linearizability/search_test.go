package linearizability

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The search gives porcupine's verdict on every partition of histories of
// a correct store and of the same with one known answer changed to another
// answer recorded on its key (a stale or future read, a token handed out
// twice): with the rule that linearizes reads at once and without it.
func TestSearchAgreesWithPorcupine(t *testing.T) {
	verdicts := map[outcome]int{}
	rapid.Check(t, func(t *rapid.T) {
		history := run(t)
		if rapid.Bool().Draw(t, "corrupt") {
			corruptWithAnotherAnswer(t, history)
		}
		pr, res, ok := prepare(history, true)
		if !ok {
			require.NoError(t, res.Err)
			return
		}
		for _, name := range pr.names {
			p, ops := pr.parts[name], pr.ops[name]
			want := notLinearizable
			if porcupine.CheckOperations(porcupineModel(newSetModel(p)), ops) {
				want = linearizable
			}
			eager, _ := searchWith(newSetModel(p), ops, 0, true)
			plain, _ := searchWith(newSetModel(p), ops, 0, false)
			require.Equal(t, want, eager, "partition %s, with the rule", name)
			require.Equal(t, want, plain, "partition %s, without it", name)
			verdicts[want]++
		}
	})
	require.Positive(t, verdicts[linearizable])
	require.Positive(t, verdicts[notLinearizable])
}

// Small histories on one key with answers drawn at random (writes that
// say they wrote nothing among them), most of them not linearizable, with outcomes lost and power losses: the search gives
// porcupine's verdict on each, with the rule and without it.
func TestSearchAgreesWithPorcupineOnRandomAnswers(t *testing.T) {
	verdicts := map[outcome]int{}
	rapid.Check(t, func(t *rapid.T) {
		history := drawHistory(t)
		pr, res, ok := prepare(history, true)
		require.True(t, ok, "%v", res.Err)
		for _, name := range pr.names {
			p, ops := pr.parts[name], pr.ops[name]
			want := notLinearizable
			if porcupine.CheckOperations(porcupineModel(newSetModel(p)), ops) {
				want = linearizable
			}
			eager, _ := searchWith(newSetModel(p), ops, 0, true)
			plain, _ := searchWith(newSetModel(p), ops, 0, false)
			require.Equal(t, want, eager, "partition %s, with the rule", name)
			require.Equal(t, want, plain, "partition %s, without it", name)
			verdicts[want]++
		}
	})
	require.Positive(t, verdicts[linearizable])
	require.Positive(t, verdicts[notLinearizable])
}

// drawHistory draws up to 12 calls on key a over overlapping intervals, at
// engine times a few milliseconds apart with TTLs as short, each answering
// one of a few answers at random, some lost, some FULL, with up to two
// power losses (a call running across one is lost) and two durable points.
// Calls and returns fall on even times, power losses on odd ones: no call
// or return may share a loss's instant (Validate).
func drawHistory(t *rapid.T) []Op {
	var losses []int64
	var history []Op
	for range rapid.IntRange(0, 2).Draw(t, "power losses") {
		at := 2*rapid.Int64Range(0, 40).Draw(t, "power loss at") + 1
		losses = append(losses, at)
		history = append(history, PowerLossAt(at))
	}
	for range rapid.IntRange(0, 2).Draw(t, "durable points") {
		call := 2 * rapid.Int64Range(0, 40).Draw(t, "durable from")
		history = append(history, DurableWithin(call, call+2*rapid.Int64Range(0, 20).Draw(t, "durable for")))
	}
	for c := range rapid.IntRange(1, 12).Draw(t, "calls") {
		call := 2 * rapid.Int64Range(0, 40).Draw(t, "call")
		ret := call + 2*rapid.Int64Range(0, 12).Draw(t, "length")
		value := func(label string) model.Value { return model.Int(rapid.Int64Range(1, 3).Draw(t, label)) }
		ttl := rapid.Int64Range(0, 3).Draw(t, "ttl")
		var in model.Input
		var out model.Output
		switch rapid.IntRange(0, 6).Draw(t, "kind") {
		case 0:
			in, out = set("a", value("set")), ok
			if rapid.IntRange(0, 4).Draw(t, "text") == 0 {
				in.Value = model.Bytes("x")
			}
			in.TTLMillis = ttl
		case 1:
			in, out = incr("a"), n(rapid.Int64Range(1, 4).Draw(t, "incr answer"))
			if rapid.IntRange(0, 4).Draw(t, "not an integer") == 0 {
				out = model.Output{Err: model.ErrNotInteger}
			}
		case 2:
			in, out = model.Input{Kind: model.Del, Keys: []string{"a"}}, n(rapid.Int64Range(0, 1).Draw(t, "del answer"))
		case 3:
			expected, swapped := value("expected"), value("swapped")
			in = model.Input{Kind: model.CAS, Key: "a", Expected: &expected, New: &swapped}
			out = model.Output{OK: rapid.Bool().Draw(t, "cas answer")}
		case 4:
			in = model.Input{Kind: model.Expire, Key: "a", TTLMillis: ttl}
			out = model.Output{OK: rapid.Bool().Draw(t, "expire answer")}
		case 5:
			in, out = model.Input{Kind: model.TTL, Key: "a"}, notFound
			if rapid.Bool().Draw(t, "ttl found") {
				out = model.Output{TTLMillis: rapid.Int64Range(1, 3).Draw(t, "ttl answer")}
			}
		default:
			in, out = get("a"), val(value("get answer"))
			if rapid.Bool().Draw(t, "get absent") {
				out = notFound
			}
		}
		now := t0 + rapid.Int64Range(0, 4).Draw(t, "now")
		op := do(c, call, ret, now, in, out)
		for _, at := range losses {
			if call < at && at <= ret {
				op.Unknown = true
			}
		}
		if op.Unknown || rapid.IntRange(0, 5).Draw(t, "lost") == 0 {
			op = unknown(c, call, now, in)
		}
		if rapid.IntRange(0, 3).Draw(t, "full") == 0 {
			op = full(op)
		}
		history = append(history, op)
	}
	return history
}

// corruptWithAnotherAnswer gives one known Get or Lease of history the
// answer another call of the same kind on the same key or name gave, when
// it differs.
func corruptWithAnotherAnswer(t *rapid.T, history []Op) {
	byKey := map[string][]int{}
	var keys []string
	for i, op := range history {
		if op.Event != Verb || op.Unknown || op.Output.Err != model.ErrNone {
			continue
		}
		if k := op.Input.Kind; k != model.Get && k != model.Lease {
			continue
		}
		key := op.Input.Kind.String() + " " + op.Input.Key
		if byKey[key] == nil {
			keys = append(keys, key)
		}
		byKey[key] = append(byKey[key], i)
	}
	if len(keys) == 0 {
		return
	}
	calls := byKey[rapid.SampledFrom(keys).Draw(t, "key")]
	i := rapid.SampledFrom(calls).Draw(t, "target")
	j := rapid.SampledFrom(calls).Draw(t, "answer from")
	history[i].Output = history[j].Output
}

// Reads that overlap one another and answer what every state answers are
// linearized as they come: without the rule, a search that finds no
// linearization reaches a pair for every subset of them first.
func TestEagerReadsPruneTheSearch(t *testing.T) {
	const reads = 12
	history := []Op{do(0, 1, 2, t0, set("a", model.Int(7)), model.Output{})}
	for c := 1; c <= reads; c++ {
		history = append(history, do(c, 10+int64(c), 100, t0, get("a"), val(model.Int(7))))
	}
	// Called before the reads, the Incr is tried first each time.
	history = append(history, do(reads+1, 5, 60, t0, incr("a"), n(8)))
	history = append(history, do(0, 110, 120, t0, get("a"), val(model.Int(9))))
	pr, _, ok := prepare(history, true)
	require.True(t, ok)
	p, ops := pr.parts["k:a"], pr.ops["k:a"]

	eager, eagerPairs := searchWith(newSetModel(p), ops, time.Minute, true)
	plain, plainPairs := searchWith(newSetModel(p), ops, time.Minute, false)
	require.Equal(t, notLinearizable, eager)
	require.Equal(t, notLinearizable, plain)
	require.LessOrEqual(t, eagerPairs, reads+3, "with the rule")
	require.GreaterOrEqual(t, plainPairs, 1<<reads, "without it")
}
