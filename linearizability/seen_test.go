package linearizability

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// seenPairs keeps a pair once, as a map from the pair's contents does,
// across many pairs (the table grows several times) that share sets of
// operations, sets of states and, with hashes cut to two bits, hashes.
func TestSeenPairsKeepEachPairOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ops := rapid.IntRange(1, 130).Draw(t, "ops")
		sets := make([]*pset, rapid.IntRange(1, 4).Draw(t, "sets"))
		for i := range sets {
			// Colliding hashes: only the ids tell the sets apart.
			sets[i] = &pset{h: uint64(i % 2), id: uint32(i + 1)}
		}
		seen, want := newSeenPairs(ops), map[string]bool{}
		l := newLinearizedSet(ops)
		weak := rapid.Bool().Draw(t, "weak hashes")
		for range rapid.IntRange(1, 3000).Draw(t, "adds") {
			op := rapid.IntRange(0, ops-1).Draw(t, "op")
			if l.words[op/64]&(1<<(op%64)) != 0 {
				l.clear(op)
			} else {
				l.set(op)
			}
			s := sets[rapid.IntRange(0, len(sets)-1).Draw(t, "set")]
			key := fmt.Sprint(l.words, s.id)
			pair := l
			if weak {
				pair = &linearizedSet{words: l.words, h: l.h & 3}
			}
			require.Equal(t, want[key], seen.add(pair, s), "pair %s", key)
			want[key] = true
			require.Equal(t, len(want), seen.len())
		}
	})
}

// The hash of a set of operations depends on the set alone, not on the
// order its operations were linearized and undone in.
func TestLinearizedSetHashIsTheSets(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ops := rapid.IntRange(1, 200).Draw(t, "ops")
		a, b := newLinearizedSet(ops), newLinearizedSet(ops)
		for _, op := range rapid.SliceOfN(rapid.IntRange(0, ops-1), 0, 50).Draw(t, "toggles") {
			if a.words[op/64]&(1<<(op%64)) != 0 {
				a.clear(op)
			} else {
				a.set(op)
			}
		}
		for i := range ops {
			if a.words[i/64]&(1<<(i%64)) != 0 {
				b.set(i)
			}
		}
		require.Equal(t, b.words, a.words)
		require.Equal(t, b.h, a.h)
	})
}
