package linearizability

import "slices"

// unbounded stands for no bound on t-x in a region: far past any
// millisecond time, and far from overflowing when one is added to it.
const unbounded = int64(1) << 61

// region is the pairs (x, t) of a run's first varied deadline x and a time
// t that a lost call on the run may have run at, within which the model
// compares every deadline with t alike: xlo <= x <= xhi, tlo <= t <= thi
// and ulo <= t-x <= uhi. It is convex, and so is the set of its integer
// pairs (every bound is on x, t or t-x).
type region struct {
	xlo, xhi, tlo, thi, ulo, uhi int64
}

// xs returns the region's least and greatest x; lo > hi when it is empty.
func (r region) xs() (lo, hi int64) {
	return max(r.xlo, r.tlo-r.uhi), min(r.xhi, r.thi-r.ulo)
}

// ts returns the region's least and greatest t.
func (r region) ts() (lo, hi int64) {
	return max(r.tlo, r.xlo+r.ulo), min(r.thi, r.xhi+r.uhi)
}

// corners returns pairs of the region among which are the corners of its
// hull, without repeats: the ends of its columns (the t of one x run from
// max(tlo, x+ulo) to min(thi, x+uhi)) at its least and greatest x, and at
// the x where either end's slope changes.
func (r region) corners() [][2]int64 {
	xa, xb := r.xs()
	if xa > xb {
		return nil
	}
	var pts [][2]int64
	for _, x := range []int64{xa, xb, r.tlo - r.ulo, r.thi - r.uhi} {
		if x >= xa && x <= xb {
			pts = append(pts, [2]int64{x, max(r.tlo, x+r.ulo)}, [2]int64{x, min(r.thi, x+r.uhi)})
		}
	}
	slices.SortFunc(pts, func(a, b [2]int64) int {
		if a[0] != b[0] {
			return int64Cmp(a[0], b[0])
		}
		return int64Cmp(a[1], b[1])
	})
	return slices.Compact(pts)
}

// regionRows returns the rows f gives over the region, as one row or a
// run; false when they are neither.
//
// Within the region each deadline of f's row is a constant, x plus a
// constant or t plus a constant, and the rest of the row is the same
// throughout (the top comment of window.go). Three pairs not on one line
// tell each deadline's kind: the rows are one row when no deadline moves,
// a run over the region's x or its t when the deadlines that move all
// follow that one, and neither when some follow x and others t. A region
// on one line (a row, a column, or a diagonal: a band of one t-x) has its
// rows at its two ends tell the same.
func (p partition) regionRows(r region, f func(x, t int64) cell) ([]cell, bool) {
	pts := r.corners()
	if len(pts) == 0 {
		return nil, true
	}
	p0 := pts[0]
	c0 := f(p0[0], p0[1])
	if len(pts) == 1 {
		return []cell{c0}, true
	}
	p1 := pts[len(pts)-1]
	var p2 *[2]int64
	for i := range pts {
		d1x, d1t := p1[0]-p0[0], p1[1]-p0[1]
		d2x, d2t := pts[i][0]-p0[0], pts[i][1]-p0[1]
		if d1x*d2t != d1t*d2x {
			p2 = &pts[i]
			break
		}
	}
	c1 := f(p1[0], p1[1])
	if p2 == nil {
		// On one line, from p0 to p1 (sorted: x, then t, grows).
		dx, dt := p1[0]-p0[0], p1[1]-p0[1]
		if dx != 0 && dt != 0 && dx != dt {
			return nil, false
		}
		if c0 == c1 {
			return []cell{c0}, true
		}
		run, ok := p.runOf(c0, c1, max(dx, dt))
		return []cell{run}, ok
	}
	c2 := f(p2[0], p2[1])
	keys1, by1, ok1 := p.moved(c0, c1)
	keys2, by2, ok2 := p.moved(c0, c2)
	if !ok1 || !ok2 {
		return nil, false
	}
	delta := func(keys []string, by []int64, k string) int64 {
		if i := slices.Index(keys, k); i >= 0 {
			return by[i]
		}
		return 0
	}
	keys := append(slices.Clone(keys1), keys2...)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var withX, withT []string
	for _, k := range keys {
		b1, b2 := delta(keys1, by1, k), delta(keys2, by2, k)
		switch {
		case b1 == p1[0]-p0[0] && b2 == p2[0]-p0[0]:
			withX = append(withX, k)
		case b1 == p1[1]-p0[1] && b2 == p2[1]-p0[1]:
			withT = append(withT, k)
		default:
			return nil, false
		}
	}
	switch {
	case len(withX) > 0 && len(withT) > 0:
		return nil, false
	case len(withX) > 0:
		lo, hi := r.xs()
		return []cell{p.asRun(p.shift(c0, withX, lo-p0[0]), withX, hi-lo)}, true
	case len(withT) > 0:
		lo, hi := r.ts()
		return []cell{p.asRun(p.shift(c0, withT, lo-p0[1]), withT, hi-lo)}, true
	}
	return []cell{c0}, true
}
