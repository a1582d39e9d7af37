package model

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// genSmallInput draws an input over a small key space, so verbs collide.
func genSmallInput(t *rapid.T, nowMillis int64, depth int) Input {
	keys := []string{"a", "b", "c"}
	vals := []Value{Int(0), Int(1), Int(-1), Int(1 << 62), Bytes("1"), Bytes("")}
	kinds := []Kind{Get, Set, Del, IncrBy, CAS, Expire, TTL, Lease, Renew, Release, Sweep}
	if depth > 0 {
		kinds = append(kinds, Update, Flush, Scan, Leases)
	}
	in := Input{
		Kind:      rapid.SampledFrom(kinds).Draw(t, "kind"),
		Key:       rapid.SampledFrom(keys).Draw(t, "key"),
		Keys:      rapid.SliceOfN(rapid.SampledFrom(keys), 0, 3).Draw(t, "keys"),
		Value:     rapid.SampledFrom(vals).Draw(t, "value"),
		Delta:     rapid.SampledFrom([]int64{1, -1, 1 << 62, -(1 << 62)}).Draw(t, "delta"),
		TTLMillis: rapid.Int64Range(-2, 20).Draw(t, "ttl"),
		Token:     rapid.Int64Range(0, 4).Draw(t, "token"),
		Owner:     rapid.SampledFrom([]string{"o1", "o2"}).Draw(t, "owner"),
		NowMillis: nowMillis,
		Abort:     rapid.Bool().Draw(t, "abort"),
		All:       rapid.Bool().Draw(t, "all"),
	}
	if in.Kind == Scan {
		in.Key = rapid.SampledFrom([]string{"", "a", "b", "c", "ab"}).Draw(t, "prefix")
	}
	if rapid.Bool().Draw(t, "hasExpected") {
		in.Expected = Ptr(rapid.SampledFrom(vals).Draw(t, "expected"))
	}
	if rapid.Bool().Draw(t, "hasNew") {
		in.New = Ptr(rapid.SampledFrom(vals).Draw(t, "new"))
	}
	if in.Kind == Update || in.Kind == Flush {
		n := rapid.IntRange(0, 3).Draw(t, "ops")
		for range n {
			op := genSmallInput(t, 0, 0)
			if in.Kind == Flush {
				op.Kind = IncrBy
			}
			in.Ops = append(in.Ops, op)
		}
	}
	return in
}

// TestStepProperties runs random sequences through Step and checks that it
// never modifies its input, that refused or aborted calls change nothing,
// and that fencing tokens only grow.
func TestStepProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := NewState()
		nowMillis := int64(1000)
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			nowMillis += rapid.Int64Range(0, 8).Draw(t, "advance")
			in := genSmallInput(t, nowMillis, 1)
			before := s.Clone()
			next, out := Step(s, in)
			require.True(t, Equal(before, s), "Step modified its input on %s", in)

			if out.Err == ErrInvalid || out.Err == ErrAborted || (in.Kind == Update && out.Err.aborts()) ||
				!writes(in.Kind) || (out.Err != ErrNone && in.Kind != Update && in.Kind != Flush) {
				require.True(t, Equal(s, next), "%s changed the state: %s -> %s", Describe(in, out), s, next)
			}
			for name, row := range s.Leases {
				require.GreaterOrEqual(t, next.Leases[name].Token, row.Token, "token went down on %s", in)
			}
			if in.Kind == Lease && out.Err == ErrNone {
				old, had := s.Leases[in.Key]
				switch {
				case !had:
					require.Equal(t, int64(1), out.Token)
				case old.Live(nowMillis):
					require.Equal(t, old.Token, out.Token)
				default:
					require.Equal(t, old.Token+1, out.Token)
				}
			}
			// An Update of one verb that does not abort equals the verb.
			if writes(in.Kind) && in.Kind != Update && in.Kind != Flush && in.Kind != Sweep {
				u, uout := Step(s, Input{Kind: Update, Ops: []Input{in}, NowMillis: nowMillis})
				if !out.Err.aborts() {
					require.True(t, Equal(next, u), "update of %s differs", in)
					require.True(t, out.Equal(uout.Sub[0]))
				} else {
					require.True(t, Equal(s, u))
					require.Equal(t, out.Err, uout.Err)
				}
			}
			s = next
		}
	})
}

// Unchanged holds only where Step leaves the state as it was: on random
// states and calls, every call it reports unchanged by its answer changed
// nothing, and it reports some of each kind of answer that changes nothing.
func TestUnchangedChangesNothing(t *testing.T) {
	unchanged := map[Kind]int{}
	rapid.Check(t, func(t *rapid.T) {
		s := NewState()
		nowMillis := int64(1000)
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			nowMillis += rapid.Int64Range(0, 8).Draw(t, "advance")
			in := genSmallInput(t, nowMillis, 1)
			next, out := Step(s, in)
			if Unchanged(in, out) {
				unchanged[in.Kind]++
				require.True(t, Equal(s, next), "%s changed the state: %s -> %s", Describe(in, out), s, next)
			}
			s = next
		}
	})
	for _, k := range []Kind{Get, TTL, Sweep, CAS, Expire, IncrBy, Lease, Renew, Release, Update, Flush, Scan, Leases} {
		require.Positive(t, unchanged[k], "no %s was unchanged by its answer", k)
	}
}
