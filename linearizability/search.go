package linearizability

import (
	"cmp"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/statekit/statekit/model"
)

// outcome is what a partition's search found.
type outcome int

const (
	linearizable outcome = iota
	notLinearizable
	outOfTime
)

// search reports whether ops, one partition's steps, have a linearization
// in m, giving up after timeout (0: never).
//
// It is the search porcupine runs (Wing and Gong's, as Lowe refined it):
// the calls and returns in time order in a list; any call before the first
// return in the list may be linearized next; a pair of the operations
// linearized and the set of states they leave that was reached before is
// not searched again; when no call can come next, the last one linearized
// is undone and the search goes on from the call after it. It adds one
// rule, which porcupine has no way to know: an operation that its answer
// says changes nothing (a read, or a write that wrote nothing: a CAS that
// did not swap, a failed IncrBy or lease verb; model.Unchanged), or a
// durable point, that may come next and that leaves every state of the set
// as it was, is linearized at once, and no branch leaves it for later.
//
// The rule loses no linearization. Say some linearization from here puts
// such an operation R after operations A1..Ak. R may come next, so none of
// A1..Ak returned before R was called, and R, A1..Ak, the rest is in real-
// time order too. From here R changes nothing, so A1..Ak leave the same
// set as before, T. Where it stood, R took T to a set U whose every state
// is one of T's (a call answering as recorded changes nothing, so it keeps
// or drops each), or one of T's with fewer of the rows a power loss could
// roll back to (a durable point, or any operation once no power loss can
// come after it). A state with more of those rows and the same current row
// can take every step the other can, and reach as much, so whatever
// followed U can follow T. Without the rule each such operation pending
// doubles the pairs a search can reach (linearized yet, or not), and a key
// that many goroutines read and write at once ran out of time.
func search(m *setModel, ops []porcupine.Operation, timeout time.Duration) outcome {
	found, _ := searchWith(m, ops, timeout, true)
	return found
}

// searchWith is search, with the rule (eager) or without it, as porcupine
// searches; it also returns how many pairs the search reached.
func searchWith(m *setModel, ops []porcupine.Operation, timeout time.Duration, eager bool) (outcome, int) {
	s := newSearchList(ops)
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	m.deadline = deadline
	// A frame is an operation linearized: the set before it, and whether
	// the rule above linearized it (undone with the operation before it).
	type frame struct {
		op     int
		before *pset
		forced bool
	}
	var stack []frame
	linearized := newLinearizedSet(len(ops))
	seen := newSeenPairs(len(ops))
	state := m.init

	// force linearizes every operation the rule takes from the current set.
	force := func() {
		if !eager {
			return
		}
		for n := s.next[0]; n >= 0 && s.isCall(n); n = s.next[n] {
			op := s.op(n)
			if s.eager[op] && m.fixes(state, s.steps[op]) {
				s.lift(op)
				linearized.set(op)
				stack = append(stack, frame{op: op, before: state, forced: true})
			}
		}
	}
	// undo pops the stack down to length mark and returns the call node to
	// go on from: the one after the oldest operation undone.
	undo := func(mark int) int {
		var op int
		for len(stack) > mark {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			s.unlift(f.op)
			linearized.clear(f.op)
			state, op = f.before, f.op
		}
		return s.next[s.callNode(op)]
	}

	force()
	n := s.next[0]
	for iter := 0; s.next[0] >= 0; iter++ {
		if iter&1023 == 0 && !deadline.IsZero() && time.Now().After(deadline) {
			return outOfTime, seen.len()
		}
		if s.isCall(n) {
			op := s.op(n)
			next := m.step(state, s.steps[op])
			if m.late {
				return outOfTime, seen.len()
			}
			if next == nil {
				n = s.next[n]
				continue
			}
			mark := len(stack)
			s.lift(op)
			linearized.set(op)
			stack = append(stack, frame{op: op, before: state})
			state = next
			force()
			if m.late {
				return outOfTime, seen.len()
			}
			if seen.add(linearized, state) {
				n = undo(mark)
				continue
			}
			n = s.next[0]
			continue
		}
		// A return: nothing pending can come next from here.
		last := len(stack) - 1
		for last >= 0 && stack[last].forced {
			last--
		}
		if last < 0 {
			return notLinearizable, seen.len()
		}
		n = undo(last)
	}
	return linearizable, seen.len()
}

// searchList is the doubly linked list of a search: node 0 is the head,
// and each operation has a call node and a return node, in time order
// (calls before returns at the same time, then by operation). Linearizing
// an operation lifts both its nodes out; undoing it, in the reverse order
// of the lifts, puts them back.
type searchList struct {
	next, prev []int // by node; -1 ends the list
	node       []int // by operation: its call node
	ret        []int // by operation: its return node
	opOf       []int // by node: the operation
	call       []bool
	steps      []*step
	eager      []bool // by operation: one the rule may linearize at once
}

func newSearchList(ops []porcupine.Operation) *searchList {
	type event struct {
		time int64
		ret  bool
		op   int
	}
	events := make([]event, 0, 2*len(ops))
	for i, op := range ops {
		events = append(events, event{op.Call, false, i}, event{op.Return, true, i})
	}
	slices.SortFunc(events, func(a, b event) int {
		if c := cmp.Compare(a.time, b.time); c != 0 {
			return c
		}
		if a.ret != b.ret {
			return boolCmp(a.ret, b.ret) // calls first
		}
		return cmp.Compare(a.op, b.op)
	})
	nodes := len(events) + 1
	s := &searchList{
		next: make([]int, nodes), prev: make([]int, nodes),
		node: make([]int, len(ops)), ret: make([]int, len(ops)),
		opOf: make([]int, nodes), call: make([]bool, nodes),
		steps: make([]*step, len(ops)), eager: make([]bool, len(ops)),
	}
	for i := range nodes {
		s.next[i], s.prev[i] = i+1, i-1
	}
	s.next[nodes-1] = -1
	for k, e := range events {
		n := k + 1
		s.opOf[n] = e.op
		if e.ret {
			s.ret[e.op] = n
		} else {
			s.node[e.op], s.call[n] = n, true
		}
	}
	for i, op := range ops {
		st := op.Input.(*step)
		s.steps[i] = st
		s.eager[i] = st.event == Durable || st.event == Verb && !st.unknown &&
			(pureRead(st.in) || st.check && st.subCheck == nil && model.Unchanged(st.in, st.want))
	}
	return s
}

func (s *searchList) isCall(n int) bool   { return s.call[n] }
func (s *searchList) op(n int) int        { return s.opOf[n] }
func (s *searchList) callNode(op int) int { return s.node[op] }

// lift takes op's call and return nodes out of the list. The nodes keep
// their own links, for unlift.
func (s *searchList) lift(op int) {
	s.remove(s.node[op])
	s.remove(s.ret[op])
}

// unlift puts back op's nodes, the last lifted operation's first.
func (s *searchList) unlift(op int) {
	s.restore(s.ret[op])
	s.restore(s.node[op])
}

func (s *searchList) remove(n int) {
	s.next[s.prev[n]] = s.next[n]
	if s.next[n] >= 0 {
		s.prev[s.next[n]] = s.prev[n]
	}
}

func (s *searchList) restore(n int) {
	s.next[s.prev[n]] = n
	if s.next[n] >= 0 {
		s.prev[s.next[n]] = n
	}
}
