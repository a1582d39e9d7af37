package linearizability

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// A store handle claims each call's engine time under its lock and applies
// the call in the same hold of it, so its calls take effect in the order of
// their times: a call with an earlier time took effect before a call with a
// later one claimed it. Op.Handle and Op.Claimed record that, and the check
// narrows each call's interval by it before the search: a call takes effect
// no earlier than its claim, and, when a call of its handle with a later
// time claimed it, no later than just before that claim. Narrowed intervals
// are all the search (and porcupine after it) need: both still choose any
// order the intervals allow, and both refuse one in which a handle's time
// went back. Without it, a call that claimed its time, waited for the lock
// while another call of its handle claimed a later one and wrote, and then
// ran at its own earlier time and saw that write, passed: the order chosen
// put it after the write, at a time before the write's.

// validClaim reports a malformed claim: one without a handle, before the
// call, after a return (an unknown outcome's, when it has one), or (on a call whose outcome is unknown) at or
// after the first power loss after the call, which its process did not
// live through. powerLosses are the real losses' times, sorted.
func validClaim(op Op, powerLosses []int64) error {
	if op.Claimed == 0 {
		return nil
	}
	if op.Handle == 0 {
		return errors.New("a claim without a handle")
	}
	if op.Claimed < op.Call {
		return fmt.Errorf("claimed its time at %d, before its call", op.Claimed)
	}
	if op.Claimed > op.Return && (!op.Unknown || op.Return > op.Call) {
		return fmt.Errorf("claimed its time at %d, after its return", op.Claimed)
	}
	if j, _ := slices.BinarySearch(powerLosses, op.Call+1); j < len(powerLosses) && powerLosses[j] <= op.Claimed {
		return fmt.Errorf("claimed its time at %d, at or after the power loss at %d", op.Claimed, powerLosses[j])
	}
	return nil
}

// claimedCall is a call with a claim, for claimBounds.
type claimedCall struct {
	i      int   // its index in the history
	lo, hi int64 // its engine time, or the range of it (an unknown outcome's)
	at     int64 // Op.Claimed
}

// claimBounds returns, for each call of history with a claim, the latest
// time it may take effect at: just before the earliest claim of a call of
// its handle with a later engine time (for a call whose time is known only
// as a range, later than all of it). The map has no entry for a call with
// no such bound. It returns an error naming two calls whose order of claims
// and of times disagree: the handle's time went back.
func claimBounds(history []Op) (map[int]int64, error) {
	byHandle := map[int][]claimedCall{}
	for i, op := range history {
		if op.Event != Verb || op.Claimed == 0 {
			continue
		}
		lo := op.Input.NowMillis
		hi := lo
		if op.Unknown && op.NowLatest > lo {
			hi = op.NowLatest
		}
		byHandle[op.Handle] = append(byHandle[op.Handle], claimedCall{i: i, lo: lo, hi: hi, at: op.Claimed})
	}
	handles := make([]int, 0, len(byHandle))
	for h := range byHandle {
		handles = append(handles, h)
	}
	slices.Sort(handles)
	bounds := map[int]int64{}
	for _, h := range handles {
		cs := byHandle[h]
		slices.SortFunc(cs, func(a, b claimedCall) int {
			return cmp.Or(cmp.Compare(a.lo, b.lo), cmp.Compare(a.at, b.at))
		})
		// first[k]: the call among cs[k:] that claimed earliest, so the
		// earliest claim after all of a call's time is first[k] for the
		// first k whose time is later.
		first := make([]int, len(cs))
		for k := len(cs) - 1; k >= 0; k-- {
			first[k] = k
			if k+1 < len(cs) && cs[first[k+1]].at < cs[k].at {
				first[k] = first[k+1]
			}
		}
		for _, c := range cs {
			k, _ := slices.BinarySearchFunc(cs, c.hi+1, func(x claimedCall, t int64) int { return cmp.Compare(x.lo, t) })
			if k == len(cs) {
				continue
			}
			later := cs[first[k]]
			if later.at <= c.at {
				return nil, fmt.Errorf("handle %d claimed engine time %d for #%d %s at %d, after it had claimed the later time %d for #%d %s at %d: its time went back",
					h, c.hi, c.i, history[c.i], c.at, later.lo, later.i, history[later.i], later.at)
			}
			bounds[c.i] = later.at - 1
		}
	}
	return bounds, nil
}
