package sim

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"slices"

	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// The inspector is statectl as users run it beside their processes: a
// short-lived process of its own that opens the file without background
// work (as cmd/statectl does), makes a few calls on the clients' keys and
// closes. Two visits in three read (the file opened read-only: get, ttl,
// dump, leases, info, check); the third writes (set, incr, decr, del, expire,
// cas, sweep, and run's lease, renewal and release, as their commands do). Its
// calls are recorded and checked as every other call is; crashes, pauses
// and power losses reach it as they reach the others. It is started only
// by an inspect draw (Rates.Inspect), never by the lifecycle.

// inspectorPID is the inspector's process id: past every client process
// and the verifier (len(procs)+1).
const inspectorPID = MaxProcs + 2

// inspectCallsMax bounds the calls of one visit.
const inspectCallsMax = 3

// inspect starts a visit of the inspector unless one runs, or the power is
// off. It reports whether it started one.
func (w *world) inspect(r *rand.Rand) bool {
	p := w.inspector
	if p.db != nil || p.starting {
		return false
	}
	p.readOnly, p.reads = r.IntN(3) != 0, 1+r.IntN(inspectCallsMax)
	if !w.start(p) {
		return false
	}
	what := "reads"
	if !p.readOnly {
		what = "writes"
	}
	w.logf("fault: statectl visits as p%d, %d %s", p.pid, p.reads, what)
	return true
}

// openRefused reports whether a read-only open's refusal is the file not
// being a statekit file yet: it is missing, holds no schema, or its
// creation was cut short before the file was in WAL mode (the switch
// writes through a rollback journal, which only a writable open may roll
// back). That is right only while no writable open has succeeded since
// the file was last found without a schema (schemaSeen, at the open's
// start).
func openRefused(err error) bool {
	return errors.Is(err, state.ErrNotStatekit) || errors.Is(err, state.ErrUnfinishedWrite) ||
		(errors.Is(err, state.ErrCannotOpen) && errors.Is(err, fs.ErrNotExist))
}

// inspectVisit is the inspector's visit once its handle is open: its
// calls, then a clean close.
func (w *world) inspectVisit(t *thread, p *process, c *client) {
	r := w.rngFault[faultInspect]
visit:
	for range p.reads {
		if p.stopping {
			return
		}
		key := w.keys[r.IntN(len(w.keys))]
		in := &model.Input{Kind: model.Get, Key: key}
		switch x := r.IntN(10); {
		case !p.readOnly && x < 3:
			in = &model.Input{Kind: model.Set, Key: key, Value: model.Int(r.Int64N(10))}
		case !p.readOnly && x < 5: // statectl incr, decr
			in = &model.Input{Kind: model.IncrBy, Key: key, Delta: []int64{1, -1}[r.IntN(2)]}
		case !p.readOnly && x == 5:
			in = &model.Input{Kind: model.Del, Keys: []string{key}}
		case !p.readOnly && x == 6:
			in = &model.Input{Kind: model.Expire, Key: key, TTLMillis: r.Int64N(2000) - 100}
		case !p.readOnly && x == 7:
			in = &model.Input{Kind: model.CAS, Key: key, Expected: model.Ptr(model.Int(r.Int64N(10))), New: model.Ptr(model.Int(r.Int64N(10)))}
		case !p.readOnly && x == 8: // statectl sweep
			w.sweep(t, p) // a failure that ends the handle stops p
			continue
		case !p.readOnly: // statectl run
			w.inspectRun(t, p, c, r)
			continue
		case x < 2:
			if !w.integrity(t, p) {
				return // it stopped p, or the power went
			}
			continue
		case x < 5:
			in.Kind = model.TTL
		case x == 7: // statectl info
			before := w.mark()
			if _, err := w.info(p); err != nil {
				w.logf("p%d info: %s", p.pid, errClass(err))
				if w.classify(p, "info", err, before) == failDead {
					w.stopOn(t, p, "info failed")
				}
				break visit
			}
			continue
		case x == 8: // statectl dump
			in = &model.Input{Kind: model.Scan, All: r.IntN(2) == 0}
			if r.IntN(2) == 0 {
				in.Key = key[:r.IntN(len(key)+1)]
			}
		case x == 9: // statectl leases
			in = &model.Input{Kind: model.Leases, All: r.IntN(2) == 0}
		}
		if _, ok := w.verb(t, p, c.id, in); !ok {
			break
		}
	}
	w.stop(p, false)
}

// inspectRun is statectl run on one of the clients' leases: the grant
// (a holder's lease is waited for no longer than the visit lasts: it is
// refused), a renewal as the command runs, and the release when it ends.
func (w *world) inspectRun(t *thread, p *process, c *client, r *rand.Rand) {
	li := r.IntN(len(w.leases))
	ttl := leaseTTLMin + r.Int64N(leaseTTLSpan)
	in := model.Input{Kind: model.Lease, Key: w.leases[li], Owner: c.owner, TTLMillis: ttl}
	out, known := w.verb(t, p, c.id, &in)
	w.leaseOutcome(c, li, in, out, known)
	if !known || out.Err != model.ErrNone {
		return
	}
	for _, kind := range []model.Kind{model.Renew, model.Release} {
		if p.stopping {
			return
		}
		in := model.Input{Kind: kind, Key: w.leases[li], Owner: c.owner, Token: out.Token}
		if kind == model.Renew {
			in.TTLMillis = ttl
		}
		o, known := w.verb(t, p, c.id, &in)
		w.leaseOutcome(c, li, in, o, known)
		if !known {
			return
		}
	}
}

// allProcs returns the client processes, the inspector and the foreign
// program, for what reaches every process: power losses, wake-ups, the end
// of a run.
func (w *world) allProcs() []*process {
	return append(w.procs[:len(w.procs):len(w.procs)], w.inspector, w.outsider)
}

// modelledKeys are the keys whose every change the history records: the
// shared keys, the counter, the transfer pair and the key group.
func (w *world) modelledKeys() []string {
	keys := append(append(slices.Clone(w.keys), hitsKey), transferKeys...)
	return append(keys, groupKeys...)
}

// modelled keeps, of a Scan's or Leases' answer, the rows of the keys and
// leases the history models (modelledKeys): the recipes' rows (rate limits, cached
// values, fill leases) are written by calls it does not record, and have
// checks of their own.
func (w *world) modelled(out model.Output) model.Output {
	out.Rows = slices.DeleteFunc(out.Rows, func(r model.KeyRow) bool {
		return !slices.Contains(w.modelledKeys(), r.Key)
	})
	out.Leases = slices.DeleteFunc(out.Leases, func(l model.NamedLease) bool { return !slices.Contains(w.leases, l.Name) })
	return out
}
