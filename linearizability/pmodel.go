package linearizability

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

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
// a NORMAL one adds it to them. With target, the row the partition is known
// to have recovered to at the power loss ahead, only that row is kept
// beside c, when c or a candidate is it: the power loss needs to know
// whether it is a candidate, and nothing else of them. Different orders of
// the same commits then leave one state where they left as many sets of
// candidates as orders.
func (s pstate) commit(c cell, durable bool, target *cell) pstate {
	if durable {
		return makeState(c, []cell{c})
	}
	if target != nil {
		if c == *target || !slices.Contains(s.cands, *target) {
			return makeState(c, []cell{c})
		}
		if compareCells(c, *target) < 0 {
			return makeState(c, []cell{c, *target})
		}
		return makeState(c, []cell{*target, c})
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
	h.int(int64(len(c.rows)))
	h.str(c.rows)
	h.int(c.span)
	h.str(c.runKeys)
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
// means the step is impossible; so does nil when late (nil: never) says the
// search has run out of time.
func (p partition) next(s pstate, st *step, late func() bool) []pstate {
	if st.event == Verb && st.unknown && st.in.Kind == model.Sweep && p.group {
		return p.partialSweeps(s, st)
	}
	if s.cur.span > 0 {
		return p.nextFromRun(s, st, late)
	}
	switch st.event {
	case PowerLoss:
		if st.target != nil { // the row it recovered to, if it may
			if !slices.Contains(s.cands, *st.target) {
				return nil
			}
			return []pstate{makeState(*st.target, []cell{*st.target})}
		}
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
		in := st.in
		if st.nowLatest > in.NowMillis && st.final {
			return p.nextInWindow(s, st, late)
		}
		// Not applied, or applied at any time it may have run at.
		states := []pstate{s}
		byHash := map[uint64][]int{s.h: {0}}
		first := in.NowMillis
		for t := first; t <= max(first, st.nowLatest); t++ {
			if (t-first)&1023 == 1023 && late != nil && late() {
				return nil
			}
			in.NowMillis = t
			nextState, out := model.Step(p.toState(s.cur), in)
			applied := s.commit(p.fromState(nextState), st.final || (st.full && CertainWrite(in, out)), st.target)
			if !slices.ContainsFunc(byHash[applied.h], func(i int) bool { return states[i].equal(applied) }) {
				byHash[applied.h] = append(byHash[applied.h], len(states))
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
	return []pstate{s.commit(c, st.durable || st.final, st.target)}
}

// partialSweeps is next for a sweep whose outcome is unknown, in a group:
// a sweep statement deletes at most so many expired rows (its LIMIT), and
// a sweep commits statement by statement, so one cut short may have
// deleted any of the group's rows expired at its cutoff, not all or none
// as a sweep that returned does. (A key's partition needs no such rule:
// its one row is deleted or not.)
//
// One whose time is known within a window only may have run at its end,
// where most rows are expired: any of those.
func (p partition) partialSweeps(s pstate, st *step) []pstate {
	out := []pstate{s} // deleted nothing
	cutoff := max(st.in.NowMillis, st.nowLatest)
	for _, m := range p.members(s) {
		rows := decodeRows(m.cur.rows)
		var expired []string
		for _, k := range sortedKeys(rows) {
			if !rows[k].Live(cutoff) {
				expired = append(expired, k)
			}
		}
		for subset := 1; subset < 1<<len(expired); subset++ {
			left := maps.Clone(rows)
			for i, k := range expired {
				if subset&(1<<i) != 0 {
					delete(left, k)
				}
			}
			c := cell{rows: encodeRows(left, func(string) bool { return true })}
			c.has = c.rows != ""
			out = append(out, m.commit(c, st.final || st.full, st.target))
		}
	}
	return p.merge(out)
}

// porcupineModel returns m as a porcupine model: the nondeterministic model
// (next) turned into a deterministic one over sets of states, as
// porcupine's NondeterministicModel.ToModel does, but with every state and
// every set kept once (setModel), so that porcupine compares two states by
// their pointers and a step it took before costs a scan of a short list.
func porcupineModel(m *setModel) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return m.init },
		Step: func(state, input, _ any) (bool, any) {
			next := m.step(state.(*pset), input.(*step))
			return next != nil, next
		},
		Equal:             func(a, b any) bool { return a == b },
		Hash:              func(s any) uint64 { return s.(*pset).h },
		DescribeOperation: func(input, _ any) string { return input.(*step).String() },
		DescribeState:     func(s any) string { return m.describe(s.(*pset)) },
	}
}

// pset is a set of states a partition may be in: where the operations
// linearized so far can have left it. Its members are interned states in a
// deterministic order (compareStates), without repeats.
type pset struct {
	members []*pstate
	h       uint64    // of the members' hashes, in order
	id      uint32    // the order in which the check met it
	steps   []setEdge // the steps taken from this set; guarded by setModel.mu
}

// setEdge is a step taken from a set: to is nil when no member can take
// it.
type setEdge struct {
	st *step
	to *pset
}

// setModel is one partition's check: every state and every set of states
// it met, each kept once (interned), so that equal ones are one pointer,
// and every step it took, by pointer. Porcupine steps the same set with the
// same operation again and again as it backtracks over orders of
// concurrent operations, and compares the sets it reached with those in its
// cache: here the first is a scan of the set's own list of steps and the
// second a pointer comparison (in a history of many unknown outcomes, model steps, set
// merges and the garbage they left were most of the check's time). A step
// is a pure function of the set and the operation, so neither changes a
// verdict.
type setModel struct {
	p      partition
	mu     sync.Mutex
	states map[uint64][]*pstate // interned states, by hash
	sets   map[uint64][]*pset   // interned sets, by hash
	next   map[stateStep][]*pstate
	init   *pset
	nsets  uint32 // sets met so far
	// deadline, when not zero, is when the search gives up: a step that
	// reaches it sets late and returns at once, without keeping what it
	// found. One step of a large set through a call whose answer was lost
	// can take long, so the search cannot wait for its own next look at
	// the clock.
	deadline time.Time
	late     bool
}

type stateStep struct {
	from *pstate
	st   *step
}

func newSetModel(p partition) *setModel {
	m := &setModel{p: p, states: map[uint64][]*pstate{}, sets: map[uint64][]*pset{},
		next: map[stateStep][]*pstate{}}
	m.init = m.internSet([]*pstate{m.internState(initial())})
	return m
}

// step returns the set after st from s, or nil if no state of s can take
// it. Sets it returns are interned: callers must not change them.
func (m *setModel) step(s *pset, st *step) *pset {
	m.mu.Lock()
	defer m.mu.Unlock()
	// A set is stepped with the operations that can come next from it, a
	// few at a time: a scan of its own short list beats a lookup in a map
	// of every step of the check.
	for _, e := range s.steps {
		if e.st == st {
			return e.to
		}
	}
	var all []*pstate
	for _, x := range s.members {
		next, ok := m.stateNext(x, st)
		if !ok {
			return nil
		}
		all = append(all, next...)
	}
	if len(all) > 1 {
		all = m.mergeRuns(all)
	}
	var next *pset
	if len(all) > 0 {
		next = m.internSet(all)
	}
	s.steps = append(s.steps, setEdge{st: st, to: next})
	return next
}

// mergeRuns returns states, interned, with runs of one row's deadlines
// joined (partition.merge): different members of a set can step to runs
// that meet, and a set is kept in one form only.
func (m *setModel) mergeRuns(states []*pstate) []*pstate {
	runs := 0
	vals := make([]pstate, len(states))
	for i, x := range states {
		vals[i] = *x
		if m.p.runnable(*x) {
			runs++
		}
	}
	if runs < 2 {
		return states
	}
	merged := m.p.merge(vals)
	out := make([]*pstate, len(merged))
	for i, s := range merged {
		out[i] = m.internState(s)
	}
	return out
}

// fixes reports whether every state of s takes st and is left as it was.
func (m *setModel) fixes(s *pset, st *step) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range s.members {
		if next, ok := m.stateNext(x, st); !ok || len(next) != 1 || next[0] != x {
			return false
		}
	}
	return true
}

// stateNext returns p.next(*x, st), interned, and true; or false, having
// set late, once the deadline has passed. Callers hold mu.
func (m *setModel) stateNext(x *pstate, st *step) ([]*pstate, bool) {
	k := stateStep{from: x, st: st}
	if next, ok := m.next[k]; ok {
		return next, true
	}
	if m.isLate() {
		return nil, false
	}
	states := m.p.next(*x, st, m.isLate)
	if m.late {
		return nil, false
	}
	next := make([]*pstate, len(states))
	for i, s := range states {
		next[i] = m.internState(s)
	}
	m.next[k] = next
	return next, true
}

// isLate reports whether the deadline has passed, and records it in late.
func (m *setModel) isLate() bool {
	if !m.late && !m.deadline.IsZero() && time.Now().After(m.deadline) {
		m.late = true
	}
	return m.late
}

// internState returns the one pointer kept for s's contents.
func (m *setModel) internState(s pstate) *pstate {
	for _, x := range m.states[s.h] {
		if x.equal(s) {
			return x
		}
	}
	x := &s
	m.states[s.h] = append(m.states[s.h], x)
	return x
}

// internSet returns the one set kept for members, interned states in any
// order and with repeats. It may reorder members.
func (m *setModel) internSet(members []*pstate) *pset {
	slices.SortFunc(members, compareStates)
	members = slices.Compact(members) // interned: equal states are one pointer
	h := fnv64(fnvOffset)
	for _, x := range members {
		h.int(int64(x.h))
	}
	for _, s := range m.sets[uint64(h)] {
		if slices.Equal(s.members, members) {
			return s
		}
	}
	m.nsets++
	s := &pset{members: slices.Clip(members), h: uint64(h), id: m.nsets}
	m.sets[s.h] = append(m.sets[s.h], s)
	return s
}

// compareStates orders states by hash, then by contents: deterministic,
// so that a set describes itself the same way in every run.
func compareStates(a, b *pstate) int {
	if c := cmp.Compare(a.h, b.h); c != 0 {
		return c
	}
	if c := compareCells(a.cur, b.cur); c != 0 {
		return c
	}
	return slices.CompareFunc(a.cands, b.cands, compareCells)
}

// describe returns s readably, as porcupine describes a set of states:
// `{7, 6 (power loss: absent | 6)}`.
func (m *setModel) describe(s *pset) string {
	descs := make([]string, len(s.members))
	for i, x := range s.members {
		descs[i] = m.p.describeState(*x)
	}
	return "{" + strings.Join(descs, ", ") + "}"
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
