package linearizability

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/statekit/statekit/model"
)

// A call whose answer was lost, against a store that reports the time each
// call ran at (Op.NowLatest), may have run at any millisecond of a window.
// A write that sets a deadline leaves a row of its own at each of them:
// stepped one millisecond at a time, a window of seconds made thousands of
// states, and every later step of the partition stepped each of them. So a
// partition's row may stand for a run of rows alike but for deadlines that
// move together (cell.span: the key's, the lease's, or some of a group's,
// runKeys: a transaction that set two of them from its one time), and a
// step takes such a run, or such a window, in pieces within which the
// model treats every deadline or time alike:
//
//   - A deadline is compared with the time a call runs at (live when it is
//     later) and nothing else: a run of deadlines splits where one of them
//     passes the call's time, a window of times at the row's deadlines.
//   - Within a piece, each deadline of the model's row either does not
//     depend on the run's deadline or the call's time at all, or carries
//     one of them with slope one (a deadline kept, a deadline set to time
//     plus a TTL); the rest of the row and the answer depend on neither,
//     or (a TTL read) carry one. Stepping a piece's ends (a window over a
//     run: three corners of its region, region.go) tells which: alike, or
//     a run again.
//
// Anything else (answers that differ at the two ends, such as a TTL read,
// or rows that carry both the run's deadline and the call's time, such as
// a deadline kept beside one set from the time) is stepped one member at a
// time, as before. TestRunsStepAsTheirMembers checks all of this against
// stepping every member alone.

// runSlots returns the deadlines run c varies: the group's rows runKeys
// names; for a key or a lease, its one ("").
func (p partition) runSlots(c cell) []string {
	if !p.group {
		return []string{""}
	}
	if c.runKeys == "" {
		return nil
	}
	return strings.Split(c.runKeys, "\x00")
}

// deadlineOf returns the deadline of one row c's slot k: the group's row
// k's, or the key's or the lease's.
func (p partition) deadlineOf(c cell, k string) int64 {
	switch {
	case p.lease:
		return c.lease.ExpiresAt
	case p.group:
		return decodeRows(c.rows)[k].ExpiresAt
	}
	return c.entry.ExpiresAt
}

// shift returns one row c with the deadlines of slots keys moved by delta.
func (p partition) shift(c cell, keys []string, delta int64) cell {
	switch {
	case p.lease:
		c.lease.ExpiresAt += delta
	case p.group:
		rows := decodeRows(c.rows)
		for _, k := range keys {
			e := rows[k]
			e.ExpiresAt += delta
			rows[k] = e
		}
		c.rows = encodeRows(rows, func(string) bool { return true })
	default:
		c.entry.ExpiresAt += delta
	}
	return c
}

// runDeadline returns the deadline a run varies (the first of them, for a
// group's): the key row's, the lease's, or the group row runKeys first
// names; for one row, its key's or lease's.
func (p partition) runDeadline(c cell) int64 {
	slots := p.runSlots(c)
	if len(slots) == 0 {
		return 0
	}
	return p.deadlineOf(c, slots[0])
}

// offsets returns how far each deadline run c varies is from the first,
// sorted, without repeats: [0] for a key's or a lease's.
func (p partition) offsets(c cell) []int64 {
	d := p.runDeadline(c)
	var offs []int64
	for _, k := range p.runSlots(c) {
		offs = append(offs, p.deadlineOf(c, k)-d)
	}
	slices.Sort(offs)
	return slices.Compact(offs)
}

// member returns the row of run c whose first varied deadline is x (for
// one row of a key or a lease, that row with deadline x).
func (p partition) member(c cell, x int64) cell {
	if slots := p.runSlots(c); len(slots) > 0 {
		c = p.shift(c, slots, x-p.runDeadline(c))
	}
	c.span, c.runKeys = 0, ""
	return c
}

// asRun returns one row c as the run of span+1 rows whose deadlines keys
// move together from c's (c itself when span is 0).
func (p partition) asRun(c cell, keys []string, span int64) cell {
	if span > 0 {
		c.span = span
		if p.group {
			c.runKeys = strings.Join(keys, "\x00")
		}
	}
	return c
}

// deadlines returns the deadlines of c's rows that a step's time is
// compared with, sorted: every deadline of one row, and of a run every
// deadline but those it varies.
func (p partition) deadlines(c cell) []int64 {
	if !c.has {
		return nil
	}
	var ds []int64
	switch {
	case p.group:
		varied := p.runSlots(c)
		rows := decodeRows(c.rows)
		for _, k := range sortedKeys(rows) {
			if d := rows[k].ExpiresAt; d != 0 && (c.span == 0 || !slices.Contains(varied, k)) {
				ds = append(ds, d)
			}
		}
	case c.span == 0:
		if d := p.runDeadline(c); d != 0 {
			ds = append(ds, d)
		}
	}
	slices.Sort(ds)
	return slices.Compact(ds)
}

// moved returns the deadlines (slots, sorted) that differ from c1 to c2,
// one row each, and how far each moved; false when the rows differ
// otherwise, or a deadline is "none" in one of them.
func (p partition) moved(c1, c2 cell) (keys []string, by []int64, ok bool) {
	if c1.has != c2.has || c1.span != 0 || c2.span != 0 {
		return nil, nil, false
	}
	if !c1.has {
		return nil, nil, true
	}
	if !p.group {
		d1, d2 := p.runDeadline(c1), p.runDeadline(c2)
		if p.shift(c2, nil, d1-d2) != c1 {
			return nil, nil, false
		}
		if d1 == d2 {
			return nil, nil, true
		}
		if d1 == 0 || d2 == 0 {
			return nil, nil, false
		}
		return []string{""}, []int64{d2 - d1}, true
	}
	r1, r2 := decodeRows(c1.rows), decodeRows(c2.rows)
	if len(r1) != len(r2) {
		return nil, nil, false
	}
	for _, k := range sortedKeys(r1) {
		e1, e2 := r1[k], r2[k]
		e2at := e2.ExpiresAt
		e2.ExpiresAt = e1.ExpiresAt
		_, found := r2[k]
		switch {
		case !found || e1 != e2:
			return nil, nil, false
		case e2at == e1.ExpiresAt:
		case e1.ExpiresAt == 0 || e2at == 0:
			return nil, nil, false
		default:
			keys, by = append(keys, k), append(by, e2at-e1.ExpiresAt)
		}
	}
	return keys, by, true
}

// runOf returns the run from c1 to c2, one rows each: c2 alike c1 but for
// some deadlines, none "none", each k (> 0) later than c1's.
func (p partition) runOf(c1, c2 cell, k int64) (cell, bool) {
	keys, by, ok := p.moved(c1, c2)
	if !ok || len(keys) == 0 || k <= 0 {
		return cell{}, false
	}
	for _, b := range by {
		if b != k {
			return cell{}, false
		}
	}
	return p.asRun(c1, keys, k), true
}

// runnable reports whether s may join a run: a run, or one row of a key
// or a lease with a deadline, with nothing a power loss could roll back
// to but itself. (One row of a group may vary any of its deadlines, so it
// joins none.)
func (p partition) runnable(s pstate) bool {
	if len(s.cands) != 1 || !s.cur.has {
		return false
	}
	return s.cur.span > 0 || !p.group && p.runDeadline(s.cur) != 0
}

// members returns the states s stands for, one row each: s itself unless
// its row is a run.
func (p partition) members(s pstate) []pstate {
	if s.cur.span == 0 {
		return []pstate{s}
	}
	d := p.runDeadline(s.cur)
	out := make([]pstate, 0, s.cur.span+1)
	for x := d; x <= d+s.cur.span; x++ {
		c := p.member(s.cur, x)
		out = append(out, makeState(c, []cell{c}))
	}
	return out
}

// ends returns c's first and last rows when it is a run, else c.
func (p partition) ends(c cell) []cell {
	if c.span == 0 {
		return []cell{c}
	}
	d := p.runDeadline(c)
	return []cell{p.member(c, d), p.member(c, d+c.span)}
}

// cutAt returns [a, b] cut before each of cuts, in order.
func cutAt(a, b int64, cuts []int64) [][2]int64 {
	var pieces [][2]int64
	for _, c := range cuts {
		if c > a && c <= b {
			pieces = append(pieces, [2]int64{a, c - 1})
			a = c
		}
	}
	return append(pieces, [2]int64{a, b})
}

// nextFromRun is next from s, whose row is a run. A verb answered as
// recorded, whose commit nothing can roll back, steps the run in pieces;
// anything else steps each member alone.
func (p partition) nextFromRun(s pstate, st *step, late func() bool) []pstate {
	if st.event == Verb && st.unknown && st.final {
		if out, ok := p.windowFromRun(s, st); ok {
			return out
		}
	}
	if st.event != Verb || st.unknown || !st.durable && !st.final {
		// One member at a time, not all of them made first: a run may
		// stand for more rows than fit in memory.
		var out []pstate
		d := p.runDeadline(s.cur)
		for i := range s.cur.span + 1 {
			if i&1023 == 1023 && late != nil && late() {
				return nil
			}
			c := p.member(s.cur, d+i)
			out = append(out, p.next(makeState(c, []cell{c}), st, late)...)
		}
		return p.merge(out)
	}
	lo, hi, now := p.runDeadline(s.cur), p.runDeadline(s.cur)+s.cur.span, st.in.NowMillis
	// A varied deadline o past the first is live at now from x = now-o+1.
	var cuts []int64
	for _, o := range p.offsets(s.cur) {
		cuts = append(cuts, now-o+1)
	}
	slices.Sort(cuts)
	var cells []cell
	for _, piece := range cutAt(lo, hi, cuts) {
		cells = append(cells, p.family(piece[0], piece[1], func(x int64) (cell, model.Output) {
			next, out := model.Step(p.toState(p.member(s.cur, x)), st.in)
			return p.fromState(next), out
		}, st.matches, late)...)
	}
	out := make([]pstate, len(cells))
	for i, c := range cells {
		out[i] = makeState(c, []cell{c})
	}
	return p.merge(out)
}

// nextInWindow is next from s, one row, for a call whose answer was lost
// and which ran, if at all, at a time of its window, no power loss after
// it: the window splits at the row's deadlines.
func (p partition) nextInWindow(s pstate, st *step, late func() bool) []pstate {
	out := []pstate{s} // not applied
	for _, piece := range cutAt(st.in.NowMillis, st.nowLatest, p.deadlines(s.cur)) {
		cells := p.family(piece[0], piece[1], func(t int64) (cell, model.Output) {
			in := st.in
			in.NowMillis = t
			next, _ := model.Step(p.toState(s.cur), in)
			return p.fromState(next), model.Output{}
		}, nil, late)
		if cells == nil && late != nil && late() {
			return nil
		}
		for _, c := range cells {
			out = append(out, makeState(c, []cell{c}))
		}
	}
	return p.merge(out)
}

// windowFromRun is next from s, whose row is a run, for a call whose
// answer was lost and which ran, if at all, at a time of its window
// (st.nowLatest may equal its NowMillis), no power loss after it; false
// when the rows do not take the shapes that file's top comment names.
//
// The window is cut at the deadlines the run does not vary. Then each pair
// of a member's first varied deadline x and a time t falls in one band of
// t-x, between two of the varied deadlines' offsets: within a band each
// varied row is live at t or expired at t for every pair, and the band's
// pairs are one region (region.go).
func (p partition) windowFromRun(s pstate, st *step) ([]pstate, bool) {
	lo, hi := p.runDeadline(s.cur), p.runDeadline(s.cur)+s.cur.span
	f := func(x, t int64) cell {
		in := st.in
		in.NowMillis = t
		next, _ := model.Step(p.toState(p.member(s.cur, x)), in)
		return p.fromState(next)
	}
	out := []pstate{s} // not applied
	offs := p.offsets(s.cur)
	for _, w := range cutAt(st.in.NowMillis, max(st.in.NowMillis, st.nowLatest), p.deadlines(s.cur)) {
		// Band i holds t-x from offs[i-1] (none below the first) to
		// offs[i]-1 (none above the last): the varied rows whose offset
		// is at most t-x have expired at t.
		ulo := int64(-unbounded)
		for i := 0; i <= len(offs); i++ {
			uhi := int64(unbounded)
			if i < len(offs) {
				uhi = offs[i] - 1
			}
			if ulo <= uhi {
				cells, ok := p.regionRows(region{xlo: lo, xhi: hi, tlo: w[0], thi: w[1], ulo: ulo, uhi: uhi}, f)
				if !ok {
					return nil, false
				}
				for _, c := range cells {
					out = append(out, makeState(c, []cell{c}))
				}
			}
			if i < len(offs) {
				ulo = offs[i]
			}
		}
	}
	return p.merge(out), true
}

// family returns the rows g gives for every x of [a, b], keeping those
// whose answer keep takes (nil: all), as runs where it can: see the
// comment at the top of this file. It returns nil when late says the
// search is out of time.
func (p partition) family(a, b int64, g func(int64) (cell, model.Output), keep func(model.Output) bool, late func() bool) []cell {
	if a > b {
		return nil
	}
	kept := func(o model.Output) bool { return keep == nil || keep(o) }
	ca, oa := g(a)
	if a < b {
		cb, ob := g(b)
		if reflect.DeepEqual(oa, ob) {
			if !kept(oa) {
				return nil
			}
			if ca == cb {
				return []cell{ca}
			}
			if r, ok := p.runOf(ca, cb, b-a); ok {
				return []cell{r}
			}
		}
	}
	var cells []cell
	for x := a; x <= b; x++ {
		if (x-a)&1023 == 1023 && late != nil && late() {
			return nil
		}
		c, o := ca, oa
		if x > a {
			c, o = g(x)
		}
		if kept(o) {
			cells = append(cells, c)
		}
	}
	return cells
}

// merge returns states with the runnable ones whose rows are alike but for
// the deadline they vary joined into the fewest runs, in a canonical form
// for a key or a lease: equal sets of rows come out alike however they
// were split. Other states pass through; the order is that of states, runs
// where their row first came.
func (p partition) merge(states []pstate) []pstate {
	type rest struct {
		c    cell   // the row with the first varied deadline 0
		keys string // the group's rows it varies
	}
	runs := map[rest][][2]int64{}
	var order []rest
	var out []pstate
	for _, s := range states {
		if !p.runnable(s) {
			out = append(out, s)
			continue
		}
		r := rest{c: p.member(s.cur, 0), keys: s.cur.runKeys}
		if _, ok := runs[r]; !ok {
			order = append(order, r)
		}
		d := p.runDeadline(s.cur)
		runs[r] = append(runs[r], [2]int64{d, d + s.cur.span})
	}
	for _, r := range order {
		iv := runs[r]
		slices.SortFunc(iv, func(x, y [2]int64) int { return cmp.Compare(x[0], y[0]) })
		lo, hi := iv[0][0], iv[0][1]
		emit := func() {
			c := r.c
			c.runKeys = r.keys
			c = p.asRun(p.member(c, lo), p.runSlots(c), hi-lo)
			out = append(out, makeState(c, []cell{c}))
		}
		for _, x := range iv[1:] {
			if x[0] <= hi+1 {
				hi = max(hi, x[1])
				continue
			}
			emit()
			lo, hi = x[0], x[1]
		}
		emit()
	}
	return out
}

// describeRun returns the deadlines of a run, such as " (deadline any of
// 40..52)", or "" for one row.
func describeRun(p partition, c cell) string {
	if c.span == 0 {
		return ""
	}
	d := p.runDeadline(c)
	if !p.group {
		return fmt.Sprintf(" (deadline any of %d..%d)", d, d+c.span)
	}
	var parts []string
	for _, k := range p.runSlots(c) {
		dk := p.deadlineOf(c, k)
		parts = append(parts, fmt.Sprintf("of %q any of %d..%d", k, dk, dk+c.span))
	}
	if len(parts) == 1 {
		return " (deadline " + parts[0] + ")"
	}
	return " (deadlines " + strings.Join(parts, ", ") + ", moving together)"
}
