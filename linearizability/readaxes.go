package linearizability

import (
	"slices"

	"github.com/statekit/statekit/model"
)

// A read whose answer is a part per key (a scan's row of each key, an
// Update's answer to the Get or TTL of each key) answers, on a box of a
// group's rows, a product: the part of an axis's keys depends on where that
// axis is, and on nothing else. Its answer differs along every axis whose
// keys it reads with their deadlines (a scan's rows carry them), so the box
// is not one row again; but the recorded answer pins each axis on its own.
// readByAxes reads each axis alone, from the box's lowest row, keeps the
// places where its keys' parts agree with the recorded answer, and steps
// only the rows those places make, each whole: an axis whose every place
// agrees stays an axis of the rows it gives. A read writes nothing, so a
// row it is stepped from is the row it gives.

// readParts returns, for a read whose answer is a part per key (a Scan; an
// Update of Gets and TTLs, none refused), agree: whether an answer agrees
// with the recorded one on the parts of keys. It returns false for any
// other call.
func readParts(st *step) (agree func(out model.Output, keys []string) bool, ok bool) {
	switch st.in.Kind {
	case model.Scan:
		rows := func(out model.Output, keys []string) []model.KeyRow {
			return slices.DeleteFunc(slices.Clone(out.Rows), func(r model.KeyRow) bool {
				return !slices.Contains(keys, r.Key) || (st.only != "" && r.Key != st.only)
			})
		}
		agree = func(out model.Output, keys []string) bool {
			return slices.Equal(rows(out, keys), rows(st.want, keys))
		}
	case model.Update:
		for _, op := range st.in.Ops {
			if (op.Kind != model.Get && op.Kind != model.TTL) || model.Refuses(op) {
				return nil, false
			}
		}
		agree = func(out model.Output, keys []string) bool {
			for j, op := range st.in.Ops {
				if !slices.Contains(keys, op.Key) || (st.subCheck != nil && !st.subCheck[j]) {
					continue
				}
				if j >= len(out.Sub) || j >= len(st.want.Sub) || !model.Matches(op, out.Sub[j], st.want.Sub[j]) {
					return false
				}
			}
			return true
		}
	default:
		return nil, false
	}
	if !st.check {
		agree = func(model.Output, []string) bool { return true }
	}
	return agree, true
}

// readByAxes steps c's box of pieces (the row at lo, with the axes span)
// for st, a read agree reads the parts of: see the comment at the top of
// this file. It returns the rows kept, or false when a row stepped is not
// the row it was stepped from (not a read after all) or late says the
// search is out of time.
func (p partition) readByAxes(c cell, axes []axis, lo []int64, span []axis, st *step, agree func(model.Output, []string) bool, late func() bool) ([]pstate, bool) {
	n := 0
	tick := func() bool {
		n++
		return n&1023 == 0 && late != nil && late()
	}
	places := make([][]int64, len(span)) // of each axis, those that agree
	var whole []axis                     // the axes every place of which agrees
	for i, a := range span {
		for x := int64(0); x <= a.span; x++ {
			if tick() {
				return nil, false
			}
			d := slices.Clone(lo)
			d[i] += x
			row := p.at(c, axes, d)
			next, out := model.Step(p.toState(row), st.in)
			if p.fromState(next) != row {
				return nil, false
			}
			if agree(out, a.keys) {
				places[i] = append(places[i], x)
			}
		}
		if len(places[i]) == 0 {
			return nil, true // no row of the box answers so
		}
		if int64(len(places[i])) == a.span+1 && a.span > 0 {
			whole = append(whole, a)
			places[i] = []int64{0}
		}
	}
	var out []pstate
	for pick := make([]int, len(span)); ; {
		if tick() {
			return nil, false
		}
		d := slices.Clone(lo)
		for i := range span {
			d[i] += places[i][pick[i]]
		}
		row := p.at(c, axes, d)
		if _, o := model.Step(p.toState(row), st.in); st.matches(o) {
			r := p.box(row, whole)
			out = append(out, makeState(r, []cell{r}))
		}
		i := 0
		for ; i < len(span); i++ {
			if pick[i]++; pick[i] < len(places[i]) {
				break
			}
			pick[i] = 0
		}
		if i == len(span) {
			return out, true
		}
	}
}
