package linearizability

import (
	"slices"
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
			s = s.commit(drawCell(t, label), rapid.Bool().Draw(t, label+" durable"))
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

// The memo answers a step it saw with what the model answered the first
// time, and a step it did not see by asking the model.
func TestStepMemoAnswersAsTheModel(t *testing.T) {
	p := partition{key: "k"}
	steps := []*step{
		{event: Verb, in: model.Input{Kind: model.IncrBy, Key: "k", Delta: 1, NowMillis: 1}, check: false},
		{event: Verb, in: model.Input{Kind: model.Set, Key: "k", Value: model.Int(2), NowMillis: 1}, check: false},
		{event: Verb, in: model.Input{Kind: model.Del, Keys: []string{"k"}, NowMillis: 1}, check: false, unknown: true},
		{event: PowerLoss},
		{event: Durable},
	}
	rapid.Check(t, func(t *rapid.T) {
		memo := &stepMemo{m: map[memoKey][]memoEntry{}}
		s := initial()
		for range rapid.IntRange(1, 20).Draw(t, "steps") {
			st := steps[rapid.IntRange(0, len(steps)-1).Draw(t, "step")]
			want := p.next(s, st)
			for range 2 { // the second answer comes from the memo
				got := memo.next(p, &s, st)
				require.Len(t, got, len(want))
				for i := range want {
					require.True(t, want[i].equal(*got[i].(*pstate)), "step %d: %s, want %s",
						i, p.describeState(*got[i].(*pstate)), p.describeState(want[i]))
				}
			}
			s = want[rapid.IntRange(0, len(want)-1).Draw(t, "next")]
		}
	})
}
