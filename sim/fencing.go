package sim

import (
	"github.com/statekit/statekit/internal/checks"
)

// resource is the thing lease holders protect: it keeps the highest token
// it accepted and rejects lower ones, as anything a holder writes must. A holder that paused past its lease still writes; only the token
// stops it.
type resource struct {
	highest  int64
	accepted []fenceWrite
	rejected int
}

// fenceWrite is one write the resource accepted.
type fenceWrite struct {
	token int64
	owner string
	at    int64 // event counter
}

// write offers a write with token by owner and reports whether the
// resource accepted it.
func (r *resource) write(token int64, owner string, at int64) bool {
	if token < r.highest {
		r.rejected++
		return false
	}
	r.highest = token
	r.accepted = append(r.accepted, fenceWrite{token: token, owner: owner, at: at})
	return true
}

// fenceWrite has client c write lease li's resource with the token it
// holds, without asking whether the lease is still live.
func (w *world) fenceWrite(c *client, li int) {
	w.offer(li, c.owner, c.holds[li].token)
}

// offer offers lease li's resource a write by owner under token, logs it
// for the fencing check, and reports whether the resource accepted it.
func (w *world) offer(li int, owner string, token int64) bool {
	ok := w.fences[li].write(token, owner, w.tick())
	w.fenceLog = append(w.fenceLog, checks.FenceWrite{Name: w.leases[li], Holder: owner, Token: token, Accepted: ok})
	verdict := "rejected"
	if ok {
		verdict = "accepted"
	}
	w.logf("fence %s #%d by %s: %s", w.leases[li], token, owner, verdict)
	return ok
}

// checkFencing checks the fencing promises with package checks: per lease
// name, a token seen by a holder belongs to one owner, and a grant that
// began after another returned has a token at least as high (tokens
// increase in grant order, across power losses; grants inside an Update
// that committed count); the resources never accepted a lower token after
// a higher one, nor one token from two owners, nor one its writer was
// never seen granted.
func (w *world) checkFencing() {
	grants := checks.Grants(w.history)
	vs := checks.Tokens(grants)
	_, _, fvs := checks.Fence(w.fenceLog, grants)
	for _, v := range append(vs, fvs...) {
		w.violate(CheckFencing, "%s", v.Detail)
	}
}
