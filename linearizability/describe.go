package linearizability

import (
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/statekit/statekit/model"
)

// prefixShown is how many ops of the linearizable prefix a description shows.
const prefixShown = 8

// describeFailure explains why partition p's ops are not linearizable: the
// longest linearizable prefix porcupine found, the states after it, and the
// ops that could come next (their call precedes every pending return),
// none of which the spec allows.
func describeFailure(p partition, ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "partition %s is not linearizable (%d operations)\n", p, len(ops))

	var prefix []porcupine.Operation
	if all := info.PartialLinearizationsOperations(); len(all) > 0 {
		prefix = longest(all[0])
	}
	fmt.Fprintf(&b, "longest linearizable prefix: %d operations", len(prefix))
	if len(prefix) > prefixShown {
		fmt.Fprintf(&b, ", the last %d", prefixShown)
	}
	b.WriteString(":\n")
	for _, op := range prefix[max(0, len(prefix)-prefixShown):] {
		fmt.Fprintf(&b, "  %s\n", op.Input.(*step))
	}

	states := []pstate{initial()}
	done := map[*step]bool{}
	for _, op := range prefix {
		st := op.Input.(*step)
		done[st] = true
		var next []pstate
		for _, s := range states {
			for _, n := range p.next(s, st, nil) {
				if !slices.ContainsFunc(next, n.equal) {
					next = append(next, n)
				}
			}
		}
		states = next
	}
	descs := make([]string, len(states))
	for i, s := range states {
		descs[i] = p.describeState(s)
	}
	fmt.Fprintf(&b, "state after it: %s\n", strings.Join(descs, " or "))

	var pending []porcupine.Operation
	minReturn := int64(0)
	for _, op := range ops {
		if done[op.Input.(*step)] {
			continue
		}
		if len(pending) == 0 || op.Return < minReturn {
			minReturn = op.Return
		}
		pending = append(pending, op)
	}
	b.WriteString("none of these can come next:\n")
	for _, op := range pending {
		if op.Call > minReturn {
			continue
		}
		st := op.Input.(*step)
		recovered := ""
		if st.event == PowerLoss && st.target != nil {
			recovered = " (the file recovered " + p.describe(*st.target) + ")"
		}
		fmt.Fprintf(&b, "  %s%s%s\n", st, recovered, specAnswers(p, states, st))
	}
	return strings.TrimRight(b.String(), "\n")
}

// specAnswers describes what the spec answers to a checked call from each
// of states, such as "  (spec: 5)"; from a run of deadlines, what it
// answers from its first and last.
func specAnswers(p partition, states []pstate, st *step) string {
	if st.event != Verb || st.unknown || !st.check {
		return ""
	}
	var answers []string
	for _, s := range states {
		for _, c := range p.ends(s.cur) {
			_, out := model.Step(p.toState(c), st.in)
			a := model.Describe(st.in, out)
			a = a[strings.LastIndex(a, " -> ")+len(" -> "):]
			if !slices.Contains(answers, a) {
				answers = append(answers, a)
			}
		}
	}
	return "  (spec: " + strings.Join(answers, " or ") + ")"
}

// longest returns the longest of porcupine's partial linearizations; ties
// go to the one whose history indexes compare first, so the choice does not
// depend on porcupine's map order.
func longest(partials [][]porcupine.Operation) []porcupine.Operation {
	var best []porcupine.Operation
	for _, l := range partials {
		switch {
		case best == nil, len(l) > len(best):
			best = l
		case len(l) == len(best) && slices.CompareFunc(l, best, func(a, b porcupine.Operation) int {
			return a.Input.(*step).index - b.Input.(*step).index
		}) < 0:
			best = l
		}
	}
	return best
}
