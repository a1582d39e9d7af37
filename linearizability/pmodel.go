package linearizability

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/statekit/statekit/model"
)

// pstate is one partition's state in the nondeterministic model: the
// current row and the rows a power loss may roll back to (the row at the
// last durable point and after each later commit), sorted and without
// duplicates. cands always holds cur.
type pstate struct {
	cur   cell
	cands []cell
}

// initial is the empty row, durable.
func initial() pstate { return pstate{cands: []cell{{}}} }

// durable collapses the candidates to the current row.
func (s pstate) durable() pstate { return pstate{cur: s.cur, cands: []cell{s.cur}} }

// commit moves to row c: a durable commit collapses the candidates to it,
// a NORMAL one adds it to them.
func (s pstate) commit(c cell, durable bool) pstate {
	if durable {
		return pstate{cur: c, cands: []cell{c}}
	}
	i, found := slices.BinarySearchFunc(s.cands, c, compareCells)
	if found {
		return pstate{cur: c, cands: s.cands}
	}
	return pstate{cur: c, cands: slices.Insert(slices.Clone(s.cands), i, c)}
}

func (s pstate) equal(t pstate) bool {
	return s.cur == t.cur && slices.Equal(s.cands, t.cands)
}

func (s pstate) hash() uint64 {
	h := fnv.New64a()
	var buf [8]byte
	putInt := func(n int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(n))
		h.Write(buf[:])
	}
	putCell := func(c cell) {
		if !c.has {
			putInt(0)
			return
		}
		putInt(1)
		if c.entry.Value.IsInt {
			putInt(c.entry.Value.Int)
		} else {
			putInt(int64(len(c.entry.Value.Bytes)))
			h.Write([]byte(c.entry.Value.Bytes))
		}
		putInt(c.entry.ExpiresAt)
		putInt(int64(len(c.lease.Owner)))
		h.Write([]byte(c.lease.Owner))
		putInt(c.lease.Token)
		putInt(c.lease.ExpiresAt)
	}
	putCell(s.cur)
	putInt(int64(len(s.cands)))
	for _, c := range s.cands {
		putCell(c)
	}
	return h.Sum64()
}

// describe returns s readably, such as `7 (power loss: absent | 6 | 7)`.
func (p partition) describeState(s pstate) string {
	if len(s.cands) == 1 {
		return p.describe(s.cur)
	}
	alts := make([]string, len(s.cands))
	for i, c := range s.cands {
		alts[i] = p.describe(c)
	}
	return p.describe(s.cur) + " (power loss: " + strings.Join(alts, " | ") + ")"
}

// next returns every state p can be in after st from s. An empty result
// means the step is impossible.
func (p partition) next(s pstate, st *step) []pstate {
	switch st.event {
	case PowerLoss:
		out := make([]pstate, len(s.cands))
		for i, c := range s.cands {
			out[i] = pstate{cur: c, cands: []cell{c}}
		}
		return out
	case Durable:
		return []pstate{s.durable()}
	}
	// A commit no power loss can come after is as good as durable: the
	// states a loss could roll back to would never be used, and keeping
	// them would only tell apart states that are the same (a history
	// without power losses kept every commit of a key as a candidate).
	if st.unknown {
		// Not applied, or applied at any time it may have run at.
		states := []pstate{s}
		in := st.in
		for t := in.NowMillis; t <= max(in.NowMillis, st.nowLatest); t++ {
			in.NowMillis = t
			nextState, out := model.Step(p.toState(s.cur), in)
			applied := s.commit(p.fromState(nextState), st.final || (st.full && CertainWrite(in, out)))
			if !slices.ContainsFunc(states, applied.equal) {
				states = append(states, applied)
			}
		}
		return states
	}
	nextState, out := model.Step(p.toState(s.cur), st.in)
	c := p.fromState(nextState)
	if !st.matches(out) {
		return nil
	}
	return []pstate{s.commit(c, st.durable || st.final)}
}

// porcupineModel returns p's porcupine model: the nondeterministic model
// turned into a deterministic one over sets of states.
func (p partition) porcupineModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{initial()} },
		Step: func(state, input, _ any) []any {
			next := p.next(state.(pstate), input.(*step))
			out := make([]any, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		Equal:             func(a, b any) bool { return a.(pstate).equal(b.(pstate)) },
		Hash:              func(s any) uint64 { return s.(pstate).hash() },
		DescribeOperation: func(input, _ any) string { return input.(*step).String() },
		DescribeState:     func(s any) string { return p.describeState(s.(pstate)) },
	}
	return nm.ToModel()
}

// CertainWrite reports whether a call that answered out certainly wrote to
// the database, so that a FULL commit of it synced: a failed verb, a CAS
// that did not swap or a Del that found nothing commits nothing.
func CertainWrite(in model.Input, out model.Output) bool {
	if out.Err != model.ErrNone {
		return false
	}
	switch in.Kind {
	case model.Set, model.IncrBy, model.Lease, model.Renew, model.Release:
		return true
	case model.CAS, model.Expire:
		return out.OK
	case model.Del, model.Sweep:
		return out.N > 0
	case model.Update, model.Flush:
		for i, sub := range out.Sub {
			if i < len(in.Ops) && CertainWrite(in.Ops[i], sub) {
				return true
			}
		}
	}
	return false
}
