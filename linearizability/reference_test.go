package linearizability

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// world is a reference implementation of the whole store with the
// durability model: every call takes effect at one instant between its call
// and its return, a NORMAL commit may be lost at a power loss, a FULL one
// (and everything before it) may not. The histories it records are correct
// by construction, so Check must accept them all.
type world struct {
	rng      *rand.Rand
	t        int64 // event counter: Call and Return times
	vnow     int64 // virtual engine time, unix ms
	skew     []int64
	cur      model.State
	since    []model.State // states a power loss may return to
	inflight map[int]*flight
	history  []Op
}

type flight struct {
	op      Op
	applied bool
}

func (w *world) tick() int64 { w.t++; return w.t }

func genCall(r *rand.Rand, depth int) model.Input {
	keys := []string{"a", "b", "{g}a", "{g}b"} // the last two checked as one partition
	vals := []model.Value{model.Int(1), model.Int(2), model.Bytes("x")}
	kinds := []model.Kind{model.Get, model.Set, model.Del, model.IncrBy, model.CAS, model.Expire, model.TTL,
		model.Lease, model.Renew, model.Release}
	if depth == 0 {
		kinds = append(kinds, model.Sweep, model.Update, model.Flush)
	}
	in := model.Input{
		Kind:      kinds[r.IntN(len(kinds))],
		Key:       keys[r.IntN(len(keys))],
		Value:     vals[r.IntN(len(vals))],
		Delta:     r.Int64N(5) - 2,
		TTLMillis: 1 + r.Int64N(30),
		Token:     1 + r.Int64N(3),
		Owner:     []string{"o1", "o2"}[r.IntN(2)],
	}
	for range 1 + r.IntN(3) {
		in.Keys = append(in.Keys, keys[r.IntN(len(keys))])
	}
	if in.Kind == model.Set || in.Kind == model.IncrBy || in.Kind == model.Expire {
		in.TTLMillis = r.Int64N(32) - 1
		if r.IntN(2) == 0 {
			in.TTLMillis = 0
		}
	}
	if r.IntN(2) == 0 {
		in.Expected = model.Ptr(vals[r.IntN(len(vals))])
	}
	if r.IntN(4) > 0 {
		in.New = model.Ptr(vals[r.IntN(len(vals))])
	}
	switch in.Kind {
	case model.Update:
		in.Abort = r.IntN(6) == 0
		for range 1 + r.IntN(3) {
			in.Ops = append(in.Ops, genCall(r, 1))
		}
	case model.Flush:
		for _, k := range keys {
			if r.IntN(2) == 0 {
				in.Ops = append(in.Ops, model.Input{Kind: model.IncrBy, Key: k, Delta: 1 + r.Int64N(3)})
			}
		}
	}
	return in
}

// hasLease reports whether a call grants leases, so it commits FULL.
func hasLease(in model.Input) bool {
	if in.Kind == model.Lease {
		return true
	}
	for _, sub := range in.Ops {
		if hasLease(sub) {
			return true
		}
	}
	return false
}

// step advances the world by one random action.
func (w *world) step() {
	r := w.rng
	c := r.IntN(len(w.skew))
	f := w.inflight[c]
	switch a := r.IntN(100); {
	case a < 25: // a client calls
		if f != nil {
			return
		}
		in := genCall(r, 0)
		in.NowMillis = w.vnow + w.skew[c]
		op := Op{Client: c, Input: in, Call: w.tick()}
		if hasLease(in) || r.IntN(10) == 0 {
			op.Durability = Full
		}
		w.inflight[c] = &flight{op: op}
	case a < 50: // its call takes effect
		if f != nil && !f.applied {
			w.apply(c)
		}
	case a < 75: // its call returns
		if f != nil && f.applied {
			w.ret(c)
		}
	case a < 76: // its process crashes: the call's outcome is unknown
		if f != nil {
			w.hide(c)
			if r.IntN(2) == 0 { // the recorder saw it dead by now
				w.history[len(w.history)-1].Return = w.tick()
			}
		}
	case a < 77: // power loss: every call in flight is unknown
		for c := range w.skew {
			if w.inflight[c] != nil {
				w.hide(c)
			}
		}
		loss := PowerLossAt(w.tick())
		w.cur = w.since[r.IntN(len(w.since))]
		w.since = []model.State{w.cur}
		if r.IntN(2) == 0 { // the recorder read the rows it recovered to
			loss.Recovered = recovery(w.cur)
		}
		w.history = append(w.history, loss)
		w.tick()
	case a < 79: // a checkpoint or a FULL commit the history does not show
		at := w.tick()
		w.history = append(w.history, DurableWithin(at, at))
		w.since = []model.State{w.cur}
	default: // time passes
		w.vnow += r.Int64N(5)
	}
}

// recovered are the keys and leases a recovery reads: those calls touch,
// and c and {g}c, which none does.
var recovered = []string{"a", "b", "c", "{g}a", "{g}b", "{g}c"}

// recovery returns the rows of the recovered keys and leases in s.
func recovery(s model.State) *Recovery {
	rows := model.NewState()
	for _, k := range recovered {
		if e, ok := s.KV[k]; ok {
			rows.KV[k] = e
		}
		if l, ok := s.Leases[k]; ok {
			rows.Leases[k] = l
		}
	}
	return &Recovery{Keys: recovered, Leases: recovered, State: rows}
}

// apply makes client c's call take effect now.
func (w *world) apply(c int) {
	f := w.inflight[c]
	w.tick()
	next, out := model.Step(w.cur, f.op.Input)
	changed := !model.Equal(next, w.cur)
	w.cur = next
	f.applied, f.op.Output = true, out
	switch {
	case f.op.Durability == Full && (changed || CertainWrite(f.op.Input, out)):
		w.since = []model.State{w.cur}
	case changed:
		w.since = append(w.since, w.cur)
	}
}

// ret returns client c's call, which took effect.
func (w *world) ret(c int) {
	f := w.inflight[c]
	f.op.Return = w.tick()
	w.history = append(w.history, f.op)
	delete(w.inflight, c)
}

// hide records client c's call as unknown.
func (w *world) hide(c int) {
	op := w.inflight[c].op
	op.Unknown, op.Output, op.Return = true, model.Output{}, 0
	w.history = append(w.history, op)
	delete(w.inflight, c)
}

// run records a history of a world seeded from t: the seed and the number
// of steps are drawn by rapid, the rest by one math/rand/v2 source.
func run(t *rapid.T) []Op {
	seed := rapid.Uint64().Draw(t, "seed")
	w := &world{rng: rand.New(rand.NewPCG(seed, 0x5eed)), vnow: t0, cur: model.NewState(), inflight: map[int]*flight{}}
	w.since = []model.State{w.cur}
	for range 2 + w.rng.IntN(3) {
		w.skew = append(w.skew, w.rng.Int64N(11)-5)
	}
	for range rapid.IntRange(300, 1200).Draw(t, "steps") {
		w.step()
	}
	for c := range w.skew {
		if f := w.inflight[c]; f != nil {
			if !f.applied {
				w.apply(c)
			}
			w.ret(c)
		}
	}
	return w.history
}

// TestReferenceHistoriesAreLinearizable is the checker's soundness test:
// every history of a correct store passes.
func TestReferenceHistoriesAreLinearizable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		history := run(t)
		res := Check(history, 20*time.Second)
		require.NoError(t, res.Err)
		require.Equal(t, Ok, res.Verdict, "%s\n%s", res, res.Description)
	})
}

// TestCorruptedReferenceHistoriesFail checks that a read answering a value
// no call ever wrote, or a grant answering a token never granted, fails.
func TestCorruptedReferenceHistoriesFail(t *testing.T) {
	corrupted := 0
	rapid.Check(t, func(t *rapid.T) {
		history := run(t)
		var targets []int
		for i, op := range history {
			known := op.Event == Verb && !op.Unknown && op.Output.Err == model.ErrNone
			if known && (op.Input.Kind == model.Get || op.Input.Kind == model.Lease) {
				targets = append(targets, i)
			}
		}
		if len(targets) == 0 {
			return
		}
		i := targets[rapid.IntRange(0, len(targets)-1).Draw(t, "target")]
		if history[i].Input.Kind == model.Get {
			history[i].Output.Value = model.Int(123_456_789)
		} else {
			history[i].Output.Token += 1000
		}
		corrupted++
		res := Check(history, 20*time.Second)
		require.NoError(t, res.Err)
		require.Equal(t, Illegal, res.Verdict, "corrupted #%d: %s", i, history[i])
		require.Contains(t, res.Description, "#"+itoa(i)+" ")
	})
	require.Positive(t, corrupted)
}

func itoa(i int) string { return model.Int(int64(i)).String() }

// A recovered row no commit left fails the check in its partition: a value
// never written, a token never granted, or any row of the keys and leases c
// and {g}c, which no call touches (the key in its group's partition).
func TestCorruptedRecoveredRowsFail(t *testing.T) {
	corrupted := 0
	rapid.Check(t, func(t *rapid.T) {
		history := run(t)
		var losses []int
		for i, op := range history {
			if op.Recovered != nil {
				losses = append(losses, i)
			}
		}
		if len(losses) == 0 {
			return
		}
		i := losses[rapid.IntRange(0, len(losses)-1).Draw(t, "power loss")]
		name := rapid.SampledFrom(recovered).Draw(t, "name")
		rec := *history[i].Recovered
		rec.State = rec.State.Clone()
		partition := keyPartition(name).String()
		if rapid.Bool().Draw(t, "lease") {
			partition = "l:" + name
			row := rec.State.Leases[name]
			row.Owner, row.Token = "o1", row.Token+1000
			rec.State.Leases[name] = row
		} else {
			rec.State.KV[name] = model.Entry{Value: model.Int(123_456_789)}
		}
		history[i].Recovered = &rec
		corrupted++
		res := Check(history, 20*time.Second)
		require.NoError(t, res.Err)
		require.Equal(t, Illegal, res.Verdict, "power loss #%d recovered to a row never written in %s", i, partition)
		require.Equal(t, partition, res.Partition)
	})
	require.Positive(t, corrupted)
}

// Leaving out the reads whose answer was lost changes no verdict, on
// histories of a correct store and on the same with one known answer
// changed (most of them then illegal): a read that changes nothing and is
// checked against nothing fits anywhere in its interval.
func TestUnknownReadsLeftOutChangeNoVerdict(t *testing.T) {
	illegal, dropped, updates := 0, 0, 0
	rapid.Check(t, func(t *rapid.T) {
		history := run(t)
		var known []int
		for i, op := range history {
			switch {
			case op.Event == Verb && op.Unknown && pureRead(op.Input):
				dropped++
				if op.Input.Kind == model.Update {
					updates++
				}
			case op.Event == Verb && !op.Unknown && op.Output.Err == model.ErrNone:
				known = append(known, i)
			}
		}
		if len(known) > 0 && rapid.Bool().Draw(t, "corrupt") {
			i := known[rapid.IntRange(0, len(known)-1).Draw(t, "target")]
			history[i].Output.Value = model.Int(123_456_789)
			history[i].Output.Int += 7
			history[i].Output.Token += 1000
			history[i].Output.OK = !history[i].Output.OK
		}
		kept := check(history, 20*time.Second, false)
		left := check(history, 20*time.Second, true)
		require.NoError(t, left.Err)
		require.Equal(t, kept.Verdict, left.Verdict, "kept: %s\n%s\nleft out: %s\n%s", kept, kept.Description, left, left.Description)
		require.Equal(t, kept.Partition, left.Partition)
		if left.Verdict == Illegal {
			illegal++
		}
	})
	require.Positive(t, dropped, "no history had a read whose answer was lost")
	require.Positive(t, updates, "no history had a reading or aborted Update whose answer was lost")
	require.Positive(t, illegal, "no history was illegal")
}
