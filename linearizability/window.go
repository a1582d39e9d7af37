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
// key's or a lease's row may stand for a run of rows alike but for their
// deadline (cell.span), and a step takes such a run, or such a window, in
// pieces within which the model treats every deadline or time alike:
//
//   - A row's deadline is compared with the time a call runs at (live when
//     it is later) and nothing else: a run of deadlines splits at the call's
//     time, a window of times at the row's deadline.
//   - Within a piece, the model's row and answer either do not depend on
//     the deadline or time at all, or carry it with slope one (a deadline
//     kept, a TTL read, a deadline set to time plus a TTL). Stepping the
//     piece's first and last member tells which: alike, or a run again.
//
// Anything else (answers that differ at the two ends, such as a TTL read,
// or rows that differ otherwise) is stepped one member at a time, as before.
// TestRunsStepAsTheirMembers checks all of this against stepping every
// member alone.

// rangeable reports whether p's rows can stand for a run of deadlines: a
// key's or a lease's can; a group's holds several deadlines and cannot.
func (p partition) rangeable() bool { return !p.group }

// deadline returns c's deadline: the key row's or the lease's (0: none).
func (p partition) deadline(c cell) int64 {
	if p.lease {
		return c.lease.ExpiresAt
	}
	return c.entry.ExpiresAt
}

// withDeadline returns c as one row with deadline d.
func (p partition) withDeadline(c cell, d int64) cell {
	if p.lease {
		c.lease.ExpiresAt = d
	} else {
		c.entry.ExpiresAt = d
	}
	c.span = 0
	return c
}

// runnable reports whether s may stand for a run: a row with a deadline,
// with nothing a power loss could roll back to but itself.
func (p partition) runnable(s pstate) bool {
	return p.rangeable() && len(s.cands) == 1 && s.cur.has && p.deadline(s.cur) != 0
}

// members returns the states s stands for, one row each: s itself unless
// its row is a run.
func (p partition) members(s pstate) []pstate {
	if s.cur.span == 0 {
		return []pstate{s}
	}
	d := p.deadline(s.cur)
	out := make([]pstate, 0, s.cur.span+1)
	for x := d; x <= d+s.cur.span; x++ {
		c := p.withDeadline(s.cur, x)
		out = append(out, makeState(c, []cell{c}))
	}
	return out
}

// ends returns c's first and last rows when it is a run, else c.
func (p partition) ends(c cell) []cell {
	if c.span == 0 {
		return []cell{c}
	}
	d := p.deadline(c)
	return []cell{p.withDeadline(c, d), p.withDeadline(c, d+c.span)}
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
	lo, hi, now := p.deadline(s.cur), p.deadline(s.cur)+s.cur.span, st.in.NowMillis
	var cells []cell
	// Expired at now, then live.
	for _, piece := range [][2]int64{{lo, min(hi, now)}, {max(lo, now+1), hi}} {
		cells = append(cells, p.family(piece[0], piece[1], func(x int64) (cell, model.Output) {
			next, out := model.Step(p.toState(p.withDeadline(s.cur, x)), st.in)
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
// it: the window splits at the row's deadline.
func (p partition) nextInWindow(s pstate, st *step, late func() bool) []pstate {
	a, b := st.in.NowMillis, st.nowLatest
	pieces := [][2]int64{{a, b}}
	if d := p.deadline(s.cur); s.cur.has && d != 0 {
		pieces = [][2]int64{{a, min(b, d-1)}, {max(a, d), b}} // live, then expired
	}
	out := []pstate{s} // not applied
	for _, piece := range pieces {
		cells := p.family(piece[0], piece[1], func(t int64) (cell, model.Output) {
			in := st.in
			in.NowMillis = t
			next, _ := model.Step(p.toState(s.cur), in)
			return p.fromState(next), model.Output{}
		}, nil, late)
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
// Each pair of a member's deadline x and a time t is in one of two
// regions: the row live at t (t < x) or expired (t >= x). Within one, the
// row the call leaves has a deadline that is the same for every pair, or x
// plus a constant (kept), or t plus a constant (set from the time), and is
// otherwise alike: three pairs of the region tell which, and the rows of
// the region are then one row, or a run over the x or the t the region
// holds.
func (p partition) windowFromRun(s pstate, st *step) ([]pstate, bool) {
	lo, hi := p.deadline(s.cur), p.deadline(s.cur)+s.cur.span
	a, b := st.in.NowMillis, max(st.in.NowMillis, st.nowLatest)
	f := func(x, t int64) cell {
		in := st.in
		in.NowMillis = t
		next, _ := model.Step(p.toState(p.withDeadline(s.cur, x)), in)
		return p.fromState(next)
	}
	// slope reports how row c2, at a point k further along one axis than
	// c1, differs from c1: 0 alike, 1 by k in its deadline, -1 otherwise.
	slope := func(c1, c2 cell, k int64) int {
		switch {
		case k == 0 || c1 == c2:
			return 0
		case c1.has && c2.has && p.deadline(c1) != 0 && p.withDeadline(c1, 0) == p.withDeadline(c2, 0) &&
			p.deadline(c2)-p.deadline(c1) == k:
			return 1
		}
		return -1
	}
	out := []pstate{s} // not applied
	// A region, by its corner (x0, t0) and how far x and t run from it
	// within the region (dx, dt, either sign).
	region := func(x0, t0, dx, dt int64) bool {
		c0 := f(x0, t0)
		// along returns the run over the axis from c0 to c (k further on
		// it), and the slope: 0 when c0 and c are alike, -1 when they
		// differ but by k in their deadline.
		along := func(c cell, k int64) (cell, int) {
			lo, hi, n := c0, c, k
			if k < 0 {
				lo, hi, n = c, c0, -k
			}
			switch s := slope(lo, hi, n); s {
			case 1:
				lo.span = n
				return lo, 1
			default:
				return c0, s
			}
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
	// Live: t < x. Its corner (hi, a): x runs down to max(lo, a+1), t up
	// to min(b, hi-1).
	if a < hi && !region(hi, a, max(lo, a+1)-hi, min(b, hi-1)-a) {
		return nil, false
	}
	// Expired: t >= x. Its corner (lo, b): x runs up to min(hi, b), t down
	// to max(a, lo).
	if b >= lo && !region(lo, b, min(hi, b)-lo, max(a, lo)-b) {
		return nil, false
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
			switch {
			case !kept(oa):
				return nil
			case ca == cb:
				return []cell{ca}
			case ca.has && cb.has && ca.span == 0 && cb.span == 0 && p.deadline(ca) != 0 &&
				p.withDeadline(ca, 0) == p.withDeadline(cb, 0) && p.deadline(cb)-p.deadline(ca) == b-a:
				ca.span = b - a
				return []cell{ca}
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
// their deadline joined into the fewest runs, in a canonical form: equal
// sets of rows come out alike however they were split. Other states pass
// through; the order is that of states, runs where their row first came.
func (p partition) merge(states []pstate) []pstate {
	if !p.rangeable() {
		return states
	}
	runs := map[cell][][2]int64{}
	var order []cell
	var out []pstate
	for _, s := range states {
		if !p.runnable(s) {
			out = append(out, s)
			continue
		}
		rest := p.withDeadline(s.cur, 0)
		if _, ok := runs[rest]; !ok {
			order = append(order, rest)
		}
		d := p.deadline(s.cur)
		runs[rest] = append(runs[rest], [2]int64{d, d + s.cur.span})
	}
	for _, rest := range order {
		iv := runs[rest]
		slices.SortFunc(iv, func(x, y [2]int64) int { return cmp.Compare(x[0], y[0]) })
		lo, hi := iv[0][0], iv[0][1]
		emit := func() {
			c := p.withDeadline(rest, lo)
			c.span = hi - lo
			out = append(out, makeState(c, []cell{c}))
		}
		for _, r := range iv[1:] {
			if r[0] <= hi+1 {
				hi = max(hi, r[1])
				continue
			}
			emit()
			lo, hi = r[0], r[1]
		}
		emit()
	}
	return out
}

// describeRun returns the deadlines of a run, such as "any of 40..52", or
// "" for one row.
func describeRun(p partition, c cell) string {
	if c.span == 0 {
		return ""
	}
	d := p.deadline(c)
	return " (deadline any of " + strconv.FormatInt(d, 10) + ".." + strconv.FormatInt(d+c.span, 10) + ")"
}
