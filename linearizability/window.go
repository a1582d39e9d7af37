package linearizability

import (
	"cmp"
	"reflect"
	"slices"
	"strconv"

	"github.com/statekit/statekit/model"
)

// A call whose answer was lost, against a store that reports the time each
// call ran at (Op.NowLatest), may have run at any millisecond of a window.
// A write that sets a deadline leaves a row of its own at each of them:
// stepped one millisecond at a time, a window of seconds made thousands of
// states, and every later step of the partition stepped each of them. So a
// partition's row may stand for a run of rows alike but for one deadline
// (cell.span: the key's, the lease's, or one key's of a group, runKey),
// and a step takes such a run, or such a window, in pieces within which
// the model treats every deadline or time alike:
//
//   - A deadline is compared with the time a call runs at (live when it is
//     later) and nothing else: a run of deadlines splits at the call's
//     time, a window of times at the row's deadlines.
//   - Within a piece, the model's row and answer either do not depend on
//     the deadline or time at all, or carry it with slope one (a deadline
//     kept, a TTL read, a deadline set to time plus a TTL). Stepping the
//     piece's first and last member tells which: alike, or a run again.
//
// Anything else (answers that differ at the two ends, such as a TTL read,
// or rows that differ otherwise, such as a group's two deadlines set from
// one time) is stepped one member at a time, as before.
// TestRunsStepAsTheirMembers checks all of this against stepping every
// member alone.

// runDeadline returns the deadline a run varies: the key row's, the
// lease's, or the group row runKey's; for one row, its key's or lease's.
func (p partition) runDeadline(c cell) int64 {
	switch {
	case p.lease:
		return c.lease.ExpiresAt
	case p.group:
		return decodeRows(c.rows)[c.runKey].ExpiresAt
	}
	return c.entry.ExpiresAt
}

// member returns the row of run c whose deadline is x (for one row of a
// key or a lease, that row with deadline x).
func (p partition) member(c cell, x int64) cell {
	switch {
	case p.lease:
		c.lease.ExpiresAt = x
	case p.group:
		if c.runKey == "" {
			return c // one row: nothing varies
		}
		rows := decodeRows(c.rows)
		e := rows[c.runKey]
		e.ExpiresAt = x
		rows[c.runKey] = e
		c.rows = encodeRows(rows, func(string) bool { return true })
	default:
		c.entry.ExpiresAt = x
	}
	c.span, c.runKey = 0, ""
	return c
}

// deadlines returns the deadlines of c's rows that a step's time is
// compared with, sorted: every deadline of one row, and of a run every
// deadline but the one it varies.
func (p partition) deadlines(c cell) []int64 {
	if !c.has {
		return nil
	}
	var ds []int64
	switch {
	case p.group:
		rows := decodeRows(c.rows)
		for _, k := range sortedKeys(rows) {
			if d := rows[k].ExpiresAt; d != 0 && (c.span == 0 || k != c.runKey) {
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

// runOf returns the run from c1 to c2, one rows each: c2 alike c1 but for
// one deadline, k (> 0) later than c1's, which is not "none".
func (p partition) runOf(c1, c2 cell, k int64) (cell, bool) {
	if !c1.has || !c2.has || c1.span != 0 || c2.span != 0 || k <= 0 {
		return cell{}, false
	}
	if !p.group {
		d := p.runDeadline(c1)
		if d == 0 || p.member(c1, 0) != p.member(c2, 0) || p.runDeadline(c2)-d != k {
			return cell{}, false
		}
		c1.span = k
		return c1, true
	}
	r1, r2 := decodeRows(c1.rows), decodeRows(c2.rows)
	if len(r1) != len(r2) {
		return cell{}, false
	}
	key := ""
	for _, k1 := range sortedKeys(r1) {
		e1, e2 := r1[k1], r2[k1]
		e2at := e2.ExpiresAt
		e2.ExpiresAt = e1.ExpiresAt
		_, ok := r2[k1]
		switch {
		case !ok || e1 != e2:
			return cell{}, false
		case e2at == e1.ExpiresAt:
		case key == "" && e1.ExpiresAt != 0 && e2at-e1.ExpiresAt == k:
			key = k1
		default:
			return cell{}, false
		}
	}
	if key == "" {
		return cell{}, false
	}
	c1.span, c1.runKey = k, key
	return c1, true
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
		var out []pstate
		for i, m := range p.members(s) {
			if i&1023 == 1023 && late != nil && late() {
				return nil
			}
			out = append(out, p.next(m, st, late)...)
		}
		return p.merge(out)
	}
	lo, hi, now := p.runDeadline(s.cur), p.runDeadline(s.cur)+s.cur.span, st.in.NowMillis
	var cells []cell
	// Expired at now, then live.
	for _, piece := range [][2]int64{{lo, min(hi, now)}, {max(lo, now+1), hi}} {
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
// when the rows do not take the shapes below.
//
// The window is cut at the deadlines the run does not vary. Then each pair
// of a member's deadline x and a time t is in one of two regions: the
// varied row live at t (t < x) or expired (t >= x). Within one, the row
// the call leaves has a deadline that is the same for every pair, or x
// plus a constant (kept), or t plus a constant (set from the time), and is
// otherwise alike: three pairs of the region tell which, and the rows of
// the region are then one row, or a run over the x or the t the region
// holds.
func (p partition) windowFromRun(s pstate, st *step) ([]pstate, bool) {
	lo, hi := p.runDeadline(s.cur), p.runDeadline(s.cur)+s.cur.span
	f := func(x, t int64) cell {
		in := st.in
		in.NowMillis = t
		next, _ := model.Step(p.toState(p.member(s.cur, x)), in)
		return p.fromState(next)
	}
	out := []pstate{s} // not applied
	// A region, by its corner (x0, t0) and how far x and t run from it
	// within the region (dx, dt, either sign).
	region := func(x0, t0, dx, dt int64) bool {
		c0 := f(x0, t0)
		// along returns the run along one axis from c0 to c, k further
		// on it, and its slope: 0 alike, 1 a run, -1 neither.
		along := func(c cell, k int64) (cell, int) {
			if k == 0 || c == c0 {
				return c0, 0
			}
			first, last := c0, c
			if k < 0 {
				first, last, k = c, c0, -k
			}
			if r, ok := p.runOf(first, last, k); ok {
				return r, 1
			}
			return c0, -1
		}
		rx, sx := along(f(x0+dx, t0), dx)
		rt, st := along(f(x0, t0+dt), dt)
		var c cell
		switch {
		case sx < 0 || st < 0 || sx == 1 && st == 1:
			return false
		case sx == 1: // kept: x plus a constant
			c = rx
		case st == 1: // set from the time: t plus a constant
			c = rt
		default:
			c = c0
		}
		out = append(out, makeState(c, []cell{c}))
		return true
	}
	for _, w := range cutAt(st.in.NowMillis, max(st.in.NowMillis, st.nowLatest), p.deadlines(s.cur)) {
		a, b := w[0], w[1]
		// Live: t < x. Its corner (hi, a): x runs down to max(lo, a+1),
		// t up to min(b, hi-1).
		if a < hi && !region(hi, a, max(lo, a+1)-hi, min(b, hi-1)-a) {
			return nil, false
		}
		// Expired: t >= x. Its corner (lo, b): x runs up to min(hi, b),
		// t down to max(a, lo).
		if b >= lo && !region(lo, b, min(hi, b)-lo, max(a, lo)-b) {
			return nil, false
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
		c   cell   // the row with the varied deadline 0
		key string // the group's row it varies
	}
	runs := map[rest][][2]int64{}
	var order []rest
	var out []pstate
	for _, s := range states {
		if !p.runnable(s) {
			out = append(out, s)
			continue
		}
		r := rest{c: p.member(s.cur, 0), key: s.cur.runKey}
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
			c.runKey = r.key
			c = p.member(c, lo)
			if hi > lo {
				c.span, c.runKey = hi-lo, r.key
			}
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
	of := ""
	if p.group {
		of = " of " + strconv.Quote(c.runKey)
	}
	return " (deadline" + of + " any of " + strconv.FormatInt(d, 10) + ".." + strconv.FormatInt(d+c.span, 10) + ")"
}
