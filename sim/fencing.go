package sim

import (
	"fmt"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
)

// resource is the thing lease holders protect: it keeps the highest token
// it accepted and rejects lower ones, as DESIGN.md asks of anything a holder
// writes. A holder that paused past its lease still writes; only the token
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
	h := c.holds[li]
	ok := w.fences[li].write(h.token, c.owner, w.tick())
	verdict := "rejected"
	if ok {
		verdict = "accepted"
	}
	w.logf("fence %s #%d by %s: %s", w.leases[li], h.token, c.owner, verdict)
}

// grant is a lease grant a holder saw: a Lease that answered a token, alone
// or inside an Update that committed.
type grant struct {
	name, owner string
	token       int64
	call, ret   int64
	index       int // in the history
}

// grants returns the grants of history, in history order.
func grants(history []linearizability.Op) []grant {
	var out []grant
	add := func(i int, op linearizability.Op, in model.Input, o model.Output) {
		if in.Kind == model.Lease && o.Err == model.ErrNone {
			out = append(out, grant{name: in.Key, owner: in.Owner, token: o.Token, call: op.Call, ret: op.Return, index: i})
		}
	}
	for i, op := range history {
		if op.Event != linearizability.Verb || op.Unknown {
			continue
		}
		add(i, op, op.Input, op.Output)
		if op.Input.Kind == model.Update && op.Output.Err == model.ErrNone {
			for j, sub := range op.Input.Ops {
				if j < len(op.Output.Sub) {
					add(i, op, sub, op.Output.Sub[j])
				}
			}
		}
	}
	return out
}

// checkFencing checks the fencing promises: per lease name, a token seen by
// a holder belongs to one owner, and a grant that began after another
// returned has a token at least as high (tokens increase in grant order,
// across power losses); the resources never accepted a lower token after a
// higher one, nor one token from two owners.
func (w *world) checkFencing() {
	gs := grants(w.history)
	type key struct {
		name  string
		token int64
	}
	first := map[key]grant{}
	for _, g := range gs {
		k := key{g.name, g.token}
		if f, ok := first[k]; ok && f.owner != g.owner {
			w.violate(CheckFencing, "lease %q token %d granted twice: to %q (%s) and to %q (%s)",
				g.name, g.token, f.owner, w.opAt(f.index), g.owner, w.opAt(g.index))
			return
		}
		if _, ok := first[k]; !ok {
			first[k] = g
		}
	}
	for j, b := range gs {
		for _, a := range gs[:j] {
			if a.name == b.name && a.ret < b.call && b.token < a.token {
				w.violate(CheckFencing, "lease %q: token %d granted after token %d had been granted:\n  %s\n  %s",
					b.name, b.token, a.token, w.opAt(a.index), w.opAt(b.index))
				return
			}
		}
	}
	for li, r := range w.fences {
		owners := map[int64]string{}
		var last int64
		for _, fw := range r.accepted {
			if fw.token < last {
				w.violate(CheckFencing, "resource of %q accepted token %d after token %d", w.leases[li], fw.token, last)
				return
			}
			last = fw.token
			if o, ok := owners[fw.token]; ok && o != fw.owner {
				w.violate(CheckFencing, "resource of %q accepted token %d from two holders, %q and %q",
					w.leases[li], fw.token, o, fw.owner)
				return
			}
			owners[fw.token] = fw.owner
		}
	}
}

// opAt describes history[i] with its index.
func (w *world) opAt(i int) string {
	return fmt.Sprintf("#%d %s", i, w.history[i])
}
