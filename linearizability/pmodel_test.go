package linearizability

import (
	"slices"
	"strconv"
	"testing"

	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// drawCell draws a key row from a small domain, so that draws repeat.
func drawCell(t *rapid.T, label string) cell {
	if !rapid.Bool().Draw(t, label+" present") {
		return cell{}
	}
	v := model.Int(rapid.Int64Range(0, 3).Draw(t, label+" value"))
	if rapid.Bool().Draw(t, label+" bytes") {
		v = model.Bytes(rapid.SampledFrom([]string{"", "x", "xy"}).Draw(t, label+" text"))
	}
	return cell{has: true, entry: model.Entry{Value: v, ExpiresAt: rapid.Int64Range(0, 2).Draw(t, label+" deadline")}}
}

// walk reaches a state from initial by drawn commits, durable points and
// power losses.
func walk(t *rapid.T, label string) pstate {
	s := initial()
	for i := range rapid.IntRange(0, 12).Draw(t, label+" steps") {
		switch rapid.IntRange(0, 3).Draw(t, label+" kind") {
		case 0, 1:
			s = s.commit(drawCell(t, label), rapid.Bool().Draw(t, label+" durable"), nil)
		case 2:
			s = s.durable()
		case 3:
			c := s.cands[rapid.IntRange(0, len(s.cands)-1).Draw(t, label+" loss")]
			s = makeState(c, []cell{c})
		}
		_ = i
	}
	return s
}

// The hash is taken once, when a state is made: it must be the hash of
// what the state holds, so that states porcupine finds equal hash alike
// however they were reached, and states that differ are told apart.
func TestStateHashIsTheHashOfItsContents(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := walk(t, "a"), walk(t, "b")
		require.True(t, slices.IsSortedFunc(a.cands, compareCells), "candidates stay sorted")
		require.Contains(t, a.cands, a.cur, "candidates hold the current row")
		again := makeState(a.cur, slices.Clone(a.cands))
		require.True(t, a.equal(again))
		require.Equal(t, again.hash(), a.hash())
		same := a.cur == b.cur && slices.Equal(a.cands, b.cands)
		require.Equal(t, same, a.equal(b), "equal compares contents")
		if same {
			require.Equal(t, a.hash(), b.hash(), "equal states, different hashes")
		}
	})
}

// The set model steps a set of states as the nondeterministic model steps
// each of them, merged: the first time by asking the model, after that
// from its memo, with the same pointer.
func TestSetModelStepsAsTheModel(t *testing.T) {
	p := partition{key: "k"}
	steps := []*step{
		{event: Verb, in: model.Input{Kind: model.IncrBy, Key: "k", Delta: 1, NowMillis: 1}, check: false},
		{event: Verb, in: model.Input{Kind: model.Set, Key: "k", Value: model.Int(2), NowMillis: 1}, check: false},
		{event: Verb, in: model.Input{Kind: model.Del, Keys: []string{"k"}, NowMillis: 1}, check: false, unknown: true},
		{event: Verb, in: model.Input{Kind: model.Get, Key: "k", NowMillis: 1}, check: true, want: model.Output{Value: model.Int(2)}},
		{event: PowerLoss},
		{event: Durable},
	}
	rapid.Check(t, func(t *rapid.T) {
		m := newSetModel(p)
		cur := m.init
		for range rapid.IntRange(1, 20).Draw(t, "steps") {
			st := steps[rapid.IntRange(0, len(steps)-1).Draw(t, "step")]
			var want []pstate
			for _, x := range cur.members {
				for _, n := range p.next(*x, st, nil) {
					if !slices.ContainsFunc(want, n.equal) {
						want = append(want, n)
					}
				}
			}
			got := m.step(cur, st)
			require.Same(t, got, m.step(cur, st), "the second answer comes from the memo")
			if len(want) == 0 {
				require.Nil(t, got, "%s: no state can take it", st)
				continue
			}
			require.NotNil(t, got, "%s", st)
			require.Len(t, got.members, len(want), "%s: got %s", st, m.describe(got))
			for _, w := range want {
				require.True(t, slices.ContainsFunc(got.members, func(x *pstate) bool { return x.equal(w) }),
					"%s: %s lacks %s", st, m.describe(got), p.describeState(w))
			}
			cur = got
		}
	})
}

// Sets of the same states are one pointer, in whatever order and with
// whatever repeats they were made, and sets of different states are not:
// porcupine compares sets by pointer.
func TestEqualSetsAreOnePointer(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newSetModel(partition{key: "k"})
		draw := func(label string) ([]*pstate, []pstate) {
			var ptrs []*pstate
			var contents []pstate
			for i := range rapid.IntRange(1, 4).Draw(t, label+" size") {
				s := walk(t, label+strconv.Itoa(i))
				ptrs = append(ptrs, m.internState(s))
				if !slices.ContainsFunc(contents, s.equal) {
					contents = append(contents, s)
				}
			}
			return ptrs, contents
		}
		a, ac := draw("a")
		b, bc := draw("b")
		same := len(ac) == len(bc)
		for _, x := range ac {
			same = same && slices.ContainsFunc(bc, x.equal)
		}
		sa := m.internSet(slices.Clone(a))
		require.Same(t, sa, m.internSet(append(slices.Clone(a), a[0])), "a repeat made another set")
		slices.Reverse(a)
		require.Same(t, sa, m.internSet(a), "another order made another set")
		require.Equal(t, same, sa == m.internSet(b), "sets of %d and %d states", len(ac), len(bc))
	})
}
