package linearizability

import (
	"slices"
	"strings"
	"sync"

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
	h     uint64 // hash of cur and cands, computed once (makeState)
}

// makeState returns the state of cur and cands. States never change once
// made, so their hash is taken here: porcupine hashes a state each time
// it looks it up, and the candidates can be many.
func makeState(cur cell, cands []cell) pstate {
	h := fnv64(fnvOffset)
	h.cell(cur)
	h.int(int64(len(cands)))
	for _, c := range cands {
		h.cell(c)
	}
	return pstate{cur: cur, cands: cands, h: uint64(h)}
}

// initial is the empty row, durable.
func initial() pstate { return makeState(cell{}, []cell{{}}) }

// durable collapses the candidates to the current row.
func (s pstate) durable() pstate { return makeState(s.cur, []cell{s.cur}) }

// commit moves to row c: a durable commit collapses the candidates to it,
// a NORMAL one adds it to them.
func (s pstate) commit(c cell, durable bool) pstate {
	if durable {
		return makeState(c, []cell{c})
	}
	i, found := slices.BinarySearchFunc(s.cands, c, compareCells)
	if found {
		return makeState(c, s.cands)
	}
	return makeState(c, slices.Insert(slices.Clone(s.cands), i, c))
}

func (s pstate) equal(t pstate) bool {
	return s.h == t.h && s.cur == t.cur && slices.Equal(s.cands, t.cands)
}

func (s pstate) hash() uint64 { return s.h }

// fnv64 is FNV-1a, over words for integers and bytes for strings, without
// the allocations of hash/fnv's interface.
type fnv64 uint64

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func (h *fnv64) byte(b byte) { *h = (*h ^ fnv64(b)) * fnvPrime }

// int mixes n in as one word.
func (h *fnv64) int(n int64) { *h = (*h ^ fnv64(n)) * fnvPrime }

func (h *fnv64) str(s string) {
	for i := 0; i < len(s); i++ {
		h.byte(s[i])
	}
}

func (h *fnv64) cell(c cell) {
	if !c.has {
		h.int(0)
		return
	}
	h.int(1)
	if c.entry.Value.IsInt {
		h.int(c.entry.Value.Int)
	} else {
		h.int(int64(len(c.entry.Value.Bytes)))
		h.str(c.entry.Value.Bytes)
	}
	h.int(c.entry.ExpiresAt)
	h.int(int64(len(c.lease.Owner)))
	h.str(c.lease.Owner)
	h.int(c.lease.Token)
	h.int(c.lease.ExpiresAt)
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
			out[i] = makeState(c, []cell{c})
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
	memo := &stepMemo{m: map[memoKey][]memoEntry{}}
	nm := porcupine.NondeterministicModel{
		Init: func() []any { s := initial(); return []any{&s} },
		Step: func(state, input, _ any) []any {
			return memo.next(p, state.(*pstate), input.(*step))
		},
		Equal:             func(a, b any) bool { x, y := a.(*pstate), b.(*pstate); return x == y || x.equal(*y) },
		Hash:              func(s any) uint64 { return s.(*pstate).hash() },
		DescribeOperation: func(input, _ any) string { return input.(*step).String() },
		DescribeState:     func(s any) string { return p.describeState(*s.(*pstate)) },
	}
	return nm.ToModel()
}

// stepMemo remembers the model's steps of one partition's check: while
// porcupine backtracks over orders of concurrent operations it steps the
// same state with the same operation again and again, and each step is a
// model.Step with its allocations (in a history of many unknown outcomes,
// most of the check's time was those steps and the garbage they left).
// A step is a pure function of the state and the operation, so the memo
// changes no verdict.
type stepMemo struct {
	mu sync.Mutex
	m  map[memoKey][]memoEntry
}

type memoKey struct {
	st   *step
	hash uint64 // of the state stepped from
}

// memoEntry is one step: from a state, the states after it, as porcupine
// takes them (each a *pstate: a state the memo gave out twice is one
// pointer, which porcupine's Equal then compares at once). Callers must
// not change to.
type memoEntry struct {
	from pstate
	to   []any
}

// next returns p.next(s, st) as porcupine takes it, from the memo when it
// has the step.
func (m *stepMemo) next(p partition, ps *pstate, st *step) []any {
	s := *ps
	k := memoKey{st: st, hash: s.hash()}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.m[k] {
		if e.from.equal(s) {
			return e.to
		}
	}
	next := p.next(s, st)
	to := make([]any, len(next))
	for i := range next {
		to[i] = &next[i]
	}
	m.m[k] = append(m.m[k], memoEntry{from: s, to: to})
	return to
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
