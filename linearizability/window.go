package linearizability

import (
	"cmp"
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
// such as two a transaction set from its one time), or, in a group, a box
// of several such axes moving independently (box.go: lost writes of
// several keys, each at a time of its own window). A step takes such a
// run, or such a window, in pieces within which the model treats every
// deadline or time alike:
//
//   - A call that reads no key of an axis passes that axis through, less
//     the keys it writes blind (a Set; a lost Del; the Sets and Dels of a
//     lost Update): the rest is stepped, and each row it gives keeps the
//     axis (nextBesideAxes). A group's scan, checked by one key's rows,
//     reads that key alone.
//   - A read whose answer is a part per key is read on a box axis by axis
//     (readaxes.go).
//   - A deadline is compared with the time a call runs at (live when it is
//     later) and nothing else: a run of deadlines splits where one of them
//     passes the call's time, a window of times at the row's deadlines.
//   - Within a piece, each deadline of the model's row either does not
//     depend on the run's deadlines or the call's time at all, or carries
//     one of them with slope one (a deadline kept, a deadline set to time
//     plus a TTL); the rest of the row and the answer depend on neither,
//     or (a TTL read) carry one. Stepping a piece's ends (a window over a
//     run: three corners of its region, region.go; a box: its lowest row
//     and its far end along each axis) tells which: alike, or a run again.
//
// Anything else (answers that differ at the two ends, such as a TTL read,
// or rows that carry both a run's deadline and the call's time, such as a
// deadline kept beside one set from the time, or a call other than such a
// read that reads keys of several axes) is stepped one member at a time,
// as before.
// TestRunsStepAsTheirMembers checks all of this against stepping every
// member alone.

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
		var varied []string
		for _, a := range p.axes(c) {
			varied = append(varied, a.keys...)
		}
		rows := decodeRows(c.rows)
		for _, k := range sortedKeys(rows) {
			if d := rows[k].ExpiresAt; d != 0 && !slices.Contains(varied, k) {
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
// recorded, or lost with a window, whose commit nothing can roll back,
// passes the axes it names no key of through (nextBesideAxes), and steps a
// run of one axis in pieces (or, lost, in regions: windowFromRun);
// anything else steps each member alone.
func (p partition) nextFromRun(s pstate, st *step, late func() bool) []pstate {
	axes := p.axes(s.cur)
	pieces := st.event == Verb && !st.unknown && (st.durable || st.final)
	window := st.event == Verb && st.unknown && st.final
	if pieces || window {
		if out, ok := p.nextBesideAxes(s, axes, st, late); ok {
			return out
		}
	}
	switch {
	case len(axes) == 1 && window:
		if out, ok := p.windowFromRun(s, st); ok {
			return out
		}
	case len(axes) == 1 && pieces:
		return p.runInPieces(s, st, late)
	case pieces:
		return p.boxInPieces(s, axes, st, late)
	}
	// One member at a time, not all of them made first: a run may stand
	// for more rows than fit in memory.
	var out []pstate
	n, stopped := 0, false
	p.eachMember(s.cur, func(c cell) bool {
		if n++; n&1023 == 0 && late != nil && late() {
			stopped = true
			return false
		}
		out = append(out, p.next(makeState(c, []cell{c}), st, late)...)
		return true
	})
	if stopped {
		return nil
	}
	return p.merge(out)
}

// runInPieces is next from s, a run of one axis, for a verb answered as
// recorded whose commit nothing can roll back: the run splits where one
// of its deadlines passes the call's time, and each piece is stepped by
// its ends (family).
func (p partition) runInPieces(s pstate, st *step, late func() bool) []pstate {
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

// boxInPieces is next from s, a run of several axes, for a verb answered
// as recorded whose commit nothing can roll back: each axis splits where
// one of its deadlines passes the call's time, and each box of pieces is
// stepped by its lowest row and its far end along each axis (each of the
// row's deadlines then stays, or moves with one axis), or, when the
// answers there differ, a read whose answer is a part per key axis by axis
// (readByAxes), and anything else one member at a time.
func (p partition) boxInPieces(s pstate, axes []axis, st *step, late func() bool) []pstate {
	now := st.in.NowMillis
	pieces := make([][][2]int64, len(axes)) // of each axis, by how far it moved
	for i, a := range axes {
		var cuts []int64
		for _, k := range a.keys { // live at now from d = now-deadline+1
			cuts = append(cuts, now-p.deadlineOf(s.cur, k)+1)
		}
		slices.Sort(cuts)
		pieces[i] = cutAt(0, a.span, cuts)
	}
	stepAt := func(d []int64) (cell, model.Output) {
		next, out := model.Step(p.toState(p.at(s.cur, axes, d)), st.in)
		return p.fromState(next), out
	}
	var out []pstate
	keep := func(c cell, o model.Output) {
		if st.matches(o) {
			out = append(out, makeState(c, []cell{c}))
		}
	}
	n := 0
	for pick := make([]int, len(axes)); ; {
		lo, span := make([]int64, len(axes)), make([]axis, len(axes))
		for i := range axes {
			piece := pieces[i][pick[i]]
			lo[i], span[i] = piece[0], axis{keys: axes[i].keys, span: piece[1] - piece[0]}
		}
		c0, o0 := stepAt(lo)
		moves, alike := p.movesAlong(c0, o0, lo, span, stepAt)
		byAxes := false
		if !alike {
			if agree, ok := readParts(st); ok {
				var read []pstate
				read, byAxes = p.readByAxes(s.cur, axes, lo, span, st, agree, late)
				out = append(out, read...)
			}
		}
		switch {
		case alike:
			keep(p.box(c0, moves), o0)
		case byAxes: // a read, axis by axis (readaxes.go)
		default:
			stopped := false
			// The piece's members, one at a time.
			p.eachMember(p.box(p.at(s.cur, axes, lo), span), func(c cell) bool {
				if n++; n&1023 == 0 && late != nil && late() {
					stopped = true
					return false
				}
				next, o := model.Step(p.toState(c), st.in)
				keep(p.fromState(next), o)
				return true
			})
			if stopped {
				return nil
			}
		}
		i := 0
		for ; i < len(axes); i++ {
			if pick[i]++; pick[i] < len(pieces[i]) {
				break
			}
			pick[i] = 0
		}
		if i == len(axes) {
			break
		}
	}
	return p.merge(out)
}

// movesAlong returns the axes along which the rows stepAt gives from a box
// of pieces (its lowest row's step c0, o0 at lo) move: for each axis the
// far end's row, whose deadlines must stay or move as far as the axis
// runs, with the same answer; false when they do not.
func (p partition) movesAlong(c0 cell, o0 model.Output, lo []int64, span []axis, stepAt func([]int64) (cell, model.Output)) ([]axis, bool) {
	var moves []axis
	seen := map[string]bool{}
	for i, a := range span {
		if a.span == 0 {
			continue
		}
		d := slices.Clone(lo)
		d[i] += a.span
		ci, oi := stepAt(d)
		if !reflect.DeepEqual(o0, oi) {
			return nil, false
		}
		keys, by, ok := p.moved(c0, ci)
		if !ok {
			return nil, false
		}
		for j, k := range keys {
			if by[j] != a.span || seen[k] {
				return nil, false
			}
			seen[k] = true
		}
		moves = append(moves, axis{keys: keys, span: a.span})
	}
	return moves, true
}

// nextBesideAxes is next from s, a group's run, for a call that reads no
// key of some of its axes: the model does not read those keys for it (nor
// does its answer depend on them), and the keys it writes there it writes
// blind, to rows that do not depend on what was there, so those axes pass
// through, less those keys. The rest of the run is stepped, and each row
// that gives keeps them. (A lost call may not have run: a row it left as
// it was keeps the axes whole.) False when the call reads a key of every
// axis, or may touch keys it does not name (a sweep, a scan).
func (p partition) nextBesideAxes(s pstate, axes []axis, st *step, late func() bool) ([]pstate, bool) {
	if !p.group {
		return nil, false
	}
	reads, writes, all := namedKeys(st.in, st.unknown)
	if st.in.Kind == model.Scan && st.only != "" {
		// A group's scan is checked by the rows of one key (project.go)
		// and writes nothing: it reads that key alone.
		reads, writes, all = map[string]bool{st.only: true}, nil, false
	}
	if all {
		return nil, false
	}
	var named, beside, left []axis
	for _, a := range axes {
		if slices.ContainsFunc(a.keys, func(k string) bool { return reads[k] }) {
			named = append(named, a)
			continue
		}
		beside = append(beside, a)
		kept := axis{span: a.span}
		for _, k := range a.keys {
			if !writes[k] {
				kept.keys = append(kept.keys, k)
			}
		}
		left = append(left, kept)
	}
	if len(beside) == 0 {
		return nil, false
	}
	rest := p.box(s.cur, named)
	next := p.next(makeState(rest, []cell{rest}), st, late)
	out := make([]pstate, 0, len(next))
	for _, r := range next {
		if len(r.cands) != 1 {
			return nil, false // a row a power loss could roll back to: no run
		}
		keep := left
		if st.unknown && r.cur == rest {
			keep = beside // not run
		}
		c := p.box(r.cur, append(p.axes(r.cur), keep...))
		out = append(out, makeState(c, []cell{c}))
	}
	if next == nil {
		return nil, true // impossible, or out of time
	}
	return p.merge(out), true
}

// namedKeys returns the keys in reads (an Update's or a flush's, its
// calls') whose rows decide what it does or answers, and those in writes
// that it writes blind, to rows that do not depend on what was there: a
// Set, and a Del whose answer (a count of rows that were live) was lost,
// not refused, alone or in an Update whose answer was lost. (An Update may
// roll back, by its abort or by another call's error: answered, its
// writes count as reads; lost, a rollback leaves the row as it was, which
// a lost call may do anyway, and keeps the axes whole.)
// all is true when it may read or write keys it does not name: a sweep, a
// scan, or a kind this does not know.
func namedKeys(in model.Input, lost bool) (reads, writes map[string]bool, all bool) {
	reads, writes = map[string]bool{}, map[string]bool{}
	blind := !model.Refuses(in)
	var walk func(model.Input, bool) bool
	walk = func(in model.Input, alone bool) bool {
		switch in.Kind {
		case model.Get, model.IncrBy, model.CAS, model.Expire, model.TTL:
			reads[in.Key] = true
		case model.Set:
			if blind && (alone || lost) {
				writes[in.Key] = true
			} else {
				reads[in.Key] = true
			}
		case model.Del:
			for _, k := range in.Keys {
				if blind && lost {
					writes[k] = true
				} else {
					reads[k] = true
				}
			}
		case model.Update, model.Flush:
			for _, op := range in.Ops {
				if !walk(op, false) {
					return false
				}
			}
		default:
			return false
		}
		return true
	}
	return reads, writes, !walk(in, true)
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
// the deadlines one axis varies joined into the fewest runs, in a
// canonical form for a key or a lease: equal sets of rows come out alike
// however they were split. Other states (and runs of more than one axis)
// pass through; the order is that of states, runs where their row first
// came.
func (p partition) merge(states []pstate) []pstate {
	type rest struct {
		c    cell   // the lowest row, moved so that its first varied deadline is 0
		keys string // the slots the axis varies, joined by NUL
	}
	runs := map[rest][][2]int64{}
	var order []rest
	var out []pstate
	for _, s := range states {
		if !p.runnable(s) || len(p.axes(s.cur)) > 1 {
			out = append(out, s)
			continue
		}
		slots, d := p.runSlots(s.cur), p.runDeadline(s.cur)
		r := rest{c: p.shift(p.member(s.cur, d), slots, -d), keys: strings.Join(slots, "\x00")}
		if _, ok := runs[r]; !ok {
			order = append(order, r)
		}
		runs[r] = append(runs[r], [2]int64{d, d + s.cur.span})
	}
	for _, r := range order {
		iv := runs[r]
		slices.SortFunc(iv, func(x, y [2]int64) int { return cmp.Compare(x[0], y[0]) })
		slots := strings.Split(r.keys, "\x00")
		lo, hi := iv[0][0], iv[0][1]
		emit := func() {
			c := p.asRun(p.shift(r.c, slots, lo), slots, hi-lo)
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
