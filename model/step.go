package model

import (
	"math"
	"slices"
)

// Step applies in to s and returns the new state and the answer. It never
// modifies s or in: the returned State is a fresh copy whenever anything
// changed, and s itself when nothing did. An Input the spec refuses (see the
// package doc) answers ErrInvalid and returns s.
func Step(s State, in Input) (State, Output) {
	if !writes(in.Kind) {
		return s, apply(&s, in, in.NowMillis)
	}
	next := s.Clone()
	out := apply(&next, in, in.NowMillis)
	if Equal(next, s) {
		return s, out
	}
	return next, out
}

// writes reports whether a verb may change the state.
func writes(k Kind) bool { return k != Get && k != TTL && k != Scan && k != Leases }

// apply runs in on *s, which the caller owns, at nowMillis.
func apply(s *State, in Input, nowMillis int64) Output {
	if invalid(in) {
		return Output{Err: ErrInvalid}
	}
	switch in.Kind {
	case Get:
		return get(*s, in.Key, nowMillis)
	case Set:
		return set(s, in.Key, in.Value, in.TTLMillis, nowMillis)
	case Del:
		return del(s, in.Keys, nowMillis)
	case IncrBy:
		return incrBy(s, in.Key, in.Delta, in.TTLMillis, nowMillis)
	case CAS:
		return cas(s, in.Key, in.Expected, in.New, in.TTLMillis, nowMillis)
	case Expire:
		return expire(s, in.Key, in.TTLMillis, nowMillis)
	case TTL:
		return ttl(*s, in.Key, nowMillis)
	case Lease:
		return lease(s, in.Key, in.Owner, in.TTLMillis, nowMillis)
	case Renew:
		return renew(s, in.Key, in.Owner, in.Token, in.TTLMillis, nowMillis)
	case Release:
		return release(s, in.Key, in.Owner, in.Token, nowMillis)
	case Sweep:
		return sweep(s, nowMillis)
	case Update:
		return update(s, in, nowMillis)
	case Flush:
		return flush(s, in, nowMillis)
	case Scan:
		return scan(*s, in.Key, in.All, nowMillis)
	case Leases:
		return listLeases(*s, in.Key, in.All, nowMillis)
	}
	return Output{Err: ErrInvalid}
}

// Refuses reports whether the spec refuses in before looking at the state:
// Step answers it ErrInvalid in every state. An Update whose sub-input is
// refused is not refused itself: the sub-input answers ErrInvalid when it
// is reached, and an earlier one may abort the Update first.
func Refuses(in Input) bool { return invalid(in) }

// invalid reports input the spec refuses before looking at the state.
func invalid(in Input) bool {
	switch in.Kind {
	case CAS:
		return badKey(in.Key) || badValue(in.Expected) || badValue(in.New) || (in.TTLMillis > 0 && in.New == nil)
	case Set:
		return badKey(in.Key) || badValue(&in.Value)
	case Get, IncrBy, Expire, TTL:
		return badKey(in.Key)
	case Release:
		return badKey(in.Key) || badOwner(in.Owner)
	case Del:
		return slices.ContainsFunc(in.Keys, badKey)
	case Lease, Renew:
		return badKey(in.Key) || badOwner(in.Owner) || in.TTLMillis <= 0
	case Sweep, Scan, Leases:
		return false
	case Update:
		for _, op := range in.Ops {
			if op.Kind == Update || op.Kind == Flush || op.Kind == Sweep || op.Kind == Scan || op.Kind == Leases {
				return true
			}
		}
		return false
	case Flush:
		for _, op := range in.Ops {
			if op.Kind != IncrBy {
				return true
			}
		}
		return false
	}
	return true
}

// deadline returns the deadline a ttl gives at now: now+ttl if ttl > 0, else
// none (0).
func deadline(ttlMillis, nowMillis int64) int64 {
	if ttlMillis > 0 {
		return nowMillis + ttlMillis
	}
	return 0
}

// addOverflows reports whether a+b leaves int64.
func addOverflows(a, b int64) bool {
	return (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b)
}
