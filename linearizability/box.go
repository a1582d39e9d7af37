package linearizability

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A run (cell.span > 0) is a box of rows: one or more axes, each the
// deadlines of some of the row's keys (a group's rows; the one of a key or
// a lease), moving together, any of span+1 places from where the cell
// holds them; the axes move independently of each other. A key's or a
// lease's run has its one axis. A group's has more when lost writes set
// deadlines of several of its keys, each from a time of its own window:
// every pair of those times is a row the group may hold.
//
// The cell holds its lowest row, span the first axis's span, and for a
// group runKeys every axis: its keys (sorted, joined by NUL, which no key
// holds), then \x02 and its span, the axes sorted by their first key and
// joined by \x01.

// axis is one direction of a run: the deadlines of keys, which move
// together, span+1 places from the run's lowest row.
type axis struct {
	keys []string // slots: a group's rows, or "" for a key's or a lease's one
	span int64
}

// axes returns the axes of run c: none for one row.
func (p partition) axes(c cell) []axis {
	if c.span == 0 {
		return nil
	}
	if !p.group {
		return []axis{{keys: []string{""}, span: c.span}}
	}
	var out []axis
	for _, a := range strings.Split(c.runKeys, "\x01") {
		keys, span, _ := strings.Cut(a, "\x02")
		n, err := strconv.ParseInt(span, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("linearizability: a run's axis %q: %v", a, err))
		}
		out = append(out, axis{keys: strings.Split(keys, "\x00"), span: n})
	}
	return out
}

// box returns one row c as the run of axes from c's deadlines, leaving out
// axes without keys or span: c itself when none is left.
func (p partition) box(c cell, axes []axis) cell {
	c.span, c.runKeys = 0, ""
	var kept []axis
	for _, a := range axes {
		if a.span > 0 && len(a.keys) > 0 {
			kept = append(kept, a)
		}
	}
	if len(kept) == 0 {
		return c
	}
	slices.SortFunc(kept, func(a, b axis) int { return strings.Compare(a.keys[0], b.keys[0]) })
	c.span = kept[0].span
	if p.group {
		parts := make([]string, len(kept))
		for i, a := range kept {
			parts[i] = strings.Join(a.keys, "\x00") + "\x02" + strconv.FormatInt(a.span, 10)
		}
		c.runKeys = strings.Join(parts, "\x01")
	}
	return c
}

// asRun returns one row c as the run of one axis, keys, from c's
// deadlines (c itself when span is 0).
func (p partition) asRun(c cell, keys []string, span int64) cell {
	return p.box(c, []axis{{keys: keys, span: span}})
}

// at returns the row of run c whose axis i moved d[i] from c's lowest.
func (p partition) at(c cell, axes []axis, d []int64) cell {
	c.span, c.runKeys = 0, ""
	for i, a := range axes {
		if d[i] != 0 {
			c = p.shift(c, a.keys, d[i])
		}
	}
	return c
}

// eachMember calls f with every row run c stands for (c itself for one
// row), until f returns false.
func (p partition) eachMember(c cell, f func(cell) bool) {
	axes := p.axes(c)
	d := make([]int64, len(axes))
	for {
		if !f(p.at(c, axes, d)) {
			return
		}
		i := 0
		for ; i < len(axes); i++ {
			if d[i] < axes[i].span {
				d[i]++
				break
			}
			d[i] = 0
		}
		if i == len(axes) {
			return
		}
	}
}

// members returns the states s stands for, one row each: s itself unless
// its row is a run.
func (p partition) members(s pstate) []pstate {
	if s.cur.span == 0 {
		return []pstate{s}
	}
	var out []pstate
	p.eachMember(s.cur, func(c cell) bool {
		out = append(out, makeState(c, []cell{c}))
		return true
	})
	return out
}

// ends returns c's lowest and highest rows when it is a run, else c.
func (p partition) ends(c cell) []cell {
	axes := p.axes(c)
	if len(axes) == 0 {
		return []cell{c}
	}
	hi := make([]int64, len(axes))
	for i, a := range axes {
		hi[i] = a.span
	}
	return []cell{p.at(c, axes, make([]int64, len(axes))), p.at(c, axes, hi)}
}

// runSlots returns the deadlines a run of one axis varies: the group's
// rows it names; for a key or a lease, its one (""). One row of a group
// varies none.
func (p partition) runSlots(c cell) []string {
	if !p.group {
		return []string{""}
	}
	if axes := p.axes(c); len(axes) > 0 {
		return axes[0].keys
	}
	return nil
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

// runDeadline returns the deadline a run of one axis varies (the first of
// them, for a group's): the key row's, the lease's, or the group row its
// axis first names; for one row, its key's or lease's.
func (p partition) runDeadline(c cell) int64 {
	slots := p.runSlots(c)
	if len(slots) == 0 {
		return 0
	}
	return p.deadlineOf(c, slots[0])
}

// offsets returns how far each deadline a run of one axis varies is from
// the first, sorted, without repeats: [0] for a key's or a lease's.
func (p partition) offsets(c cell) []int64 {
	d := p.runDeadline(c)
	var offs []int64
	for _, k := range p.runSlots(c) {
		offs = append(offs, p.deadlineOf(c, k)-d)
	}
	slices.Sort(offs)
	return slices.Compact(offs)
}

// member returns the row of a run of one axis whose first varied deadline
// is x (for one row of a key or a lease, that row with deadline x).
func (p partition) member(c cell, x int64) cell {
	if slots := p.runSlots(c); len(slots) > 0 {
		c = p.shift(c, slots, x-p.runDeadline(c))
	}
	c.span, c.runKeys = 0, ""
	return c
}

// describeRun returns the deadlines of a run, such as " (deadline any of
// 40..52)", or "" for one row.
func describeRun(p partition, c cell) string {
	axes := p.axes(c)
	if len(axes) == 0 {
		return ""
	}
	if !p.group {
		d := p.runDeadline(c)
		return fmt.Sprintf(" (deadline any of %d..%d)", d, d+c.span)
	}
	var parts []string
	for _, a := range axes {
		var ks []string
		for _, k := range a.keys {
			dk := p.deadlineOf(c, k)
			ks = append(ks, fmt.Sprintf("of %q any of %d..%d", k, dk, dk+a.span))
		}
		if len(ks) == 1 {
			parts = append(parts, "deadline "+ks[0])
		} else {
			parts = append(parts, "deadlines "+strings.Join(ks, ", ")+", moving together")
		}
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
