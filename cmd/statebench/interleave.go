package main

import "time"

// sliceTime is how long one side runs before the other takes over: short,
// so that both sides see the same noise from a shared machine.
const sliceTime = 100 * time.Millisecond

// interleave runs a and b after a short warm-up, count rounds of the budget
// each, in slices of about sliceTime that alternate which side goes first,
// and adds up each side's slices. The first sample also gets, per slice,
// its rate over the rate of b's slice beside it.
func interleave(e *env, a, b func(budget) (sample, error)) (sa, sb sample, err error) {
	return interleaveWith(e, a, b, runOpts{warm: budget{n: 200}, slice: true})
}

// runOpts says how interleaveWith runs a scenario.
type runOpts struct {
	warm  budget // untimed run of each side first
	slice bool   // alternate in slices of sliceTime; else a whole budget per round
}

// interleaveWith is interleave with its warm-up and slicing chosen.
func interleaveWith(e *env, a, b func(budget) (sample, error), o runOpts) (sa, sb sample, err error) {
	if _, err := a(o.warm); err != nil {
		return sa, sb, err
	}
	if _, err := b(o.warm); err != nil {
		return sa, sb, err
	}
	slices, per := 1, e.bt
	if o.slice {
		switch {
		case e.bt.d > sliceTime:
			slices = int(e.bt.d / sliceTime)
			per = budget{d: e.bt.d / time.Duration(slices)}
		case e.bt.n >= 2000:
			slices = int(e.bt.n / 1000)
			per = budget{n: e.bt.n / int64(slices)}
		}
	}
	for i := range e.count * slices {
		first, second := a, b
		if i%2 == 1 {
			first, second = b, a
		}
		r1, err := first(per)
		if err != nil {
			return sa, sb, err
		}
		r2, err := second(per)
		if err != nil {
			return sa, sb, err
		}
		if i%2 == 1 {
			r1, r2 = r2, r1
		}
		sa.merge(r1)
		sb.merge(r2)
		if ra, rb := r1.rate(), r2.rate(); ra > 0 && rb > 0 {
			sa.pairs = append(sa.pairs, ra/rb)
		}
	}
	return sa, sb, nil
}
