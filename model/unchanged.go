package model

// Unchanged reports whether a call of in that answered out left the state
// as it was, in every state in which it answers out: a read, or a write
// whose answer says it wrote nothing (a CAS that did not swap, an Expire
// with a positive TTL that found no live key, an IncrBy or a lease verb
// that failed, a Sweep that deleted nothing, an Update that aborted or
// whose every verb is unchanged by its answer). A Del that counted no key
// is not: it deletes an expired row, which it does not count. Set always
// writes.
func Unchanged(in Input, out Output) bool {
	if out.Err == ErrInvalid {
		return true
	}
	switch in.Kind {
	case Get, TTL, Scan, Leases:
		return true
	case Sweep:
		return out.Err == ErrNone && out.N == 0
	case CAS:
		return out.Err == ErrNone && !out.OK
	case Expire:
		return out.Err == ErrNone && !out.OK && in.TTLMillis > 0
	case IncrBy, Lease, Renew, Release:
		return out.Err != ErrNone
	case Update:
		if in.Abort || out.Err != ErrNone {
			return true
		}
		return subsUnchanged(in, out)
	case Flush:
		return subsUnchanged(in, out)
	}
	return false
}

// subsUnchanged reports whether out answers every verb of in, each
// unchanged by its answer.
func subsUnchanged(in Input, out Output) bool {
	if len(out.Sub) != len(in.Ops) {
		return false
	}
	for i, sub := range in.Ops {
		if !Unchanged(sub, out.Sub[i]) {
			return false
		}
	}
	return true
}
