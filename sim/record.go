package sim

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/internal/drive"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// observe returns the context a call of p runs with: the engine tells it
// the time the call runs at, which fl, if not nil, records as its input's
// NowMillis. (The clock check sees every time the engine claims, through
// hooks.Engine.Times.)
func (w *world) observe(p *process, fl *inflight) context.Context {
	return hooks.WithNow(w.ctx, func(ms int64) {
		if fl != nil {
			fl.in.NowMillis, fl.claimed, fl.claimAt = ms, true, w.tick()
		}
	})
}

// verb runs *inp on p for client c on thread t, records it, and returns
// the answer and whether it is known. The engine says the time the call
// ran at (inp.NowMillis). A call the disk refused for lack of space is left
// out of the history: the engine promises it wrote nothing, and the checker
// holds it to that.
func (w *world) verb(t *thread, p *process, c int, inp *model.Input) (model.Output, bool) {
	inp.NowMillis = w.trueMillis + p.offset // until the engine says
	fl := &inflight{p: p, client: c, in: inp, call: w.tick(), writes: w.m.WritesBy(p.pid)}
	t.flight = fl
	before := w.mark()
	res := drive.Run(w.observe(p, fl), p.db, *inp)
	t.flight = nil
	in := *inp
	if res.Err == nil && (in.Kind == model.Scan || in.Kind == model.Leases) {
		res.Out = w.modelled(res.Out)
	}
	if res.Err == nil {
		w.record(p, fl.claim(linearizability.Op{Client: c, Input: in, Output: res.Out, Call: fl.call, Return: w.tick(),
			Durability: durability(in, res.Out, w.cfg.SyncFull)}))
		return res.Out, true
	}
	f := w.classify(p, in.Kind.String(), res.Err, before)
	if f == failFull {
		w.omit(p, in)
		return model.Output{}, false
	}
	// Open until the next power loss, or the end: a commit whose sync
	// failed can still surface when another process recovers the WAL.
	w.recordUnknown(fl)
	if f == failDead {
		w.stopOn(t, p, "handle failed")
	}
	return model.Output{}, false
}

// recordUnknown records the call fl as of unknown outcome.
func (w *world) recordUnknown(fl *inflight) {
	if leaveOut(w, fl) {
		if unclaimed(fl) && !wroteNothing(w, fl) && !w.tearing {
			w.stats.Unclaimed++
		}
		w.noEffect(fl)
		return
	}
	if fl.in.Kind == model.Sweep && !w.tearing {
		w.recipeSwept(nil, fl.in.NowMillis, fl.call, w.tick()) // it may have deleted a recipe's rows
	}
	w.record(fl.p, fl.claim(linearizability.Op{Client: fl.client, Input: *fl.in, Call: fl.call, Return: fl.call, Unknown: true}))
}

// leaveOut reports whether a call whose outcome a fault hid certainly
// changed nothing: unclaimed, or wroteNothing, or another rule a test
// plants to show that the checks catch a wrong one.
var leaveOut = func(w *world, fl *inflight) bool { return unclaimed(fl) || wroteNothing(w, fl) }

// unclaimed reports whether fl was cut before the engine said what time it
// runs at. The engine claims a call's time under its lock, before any
// statement of it runs (a group's leader claims each member's before the
// group's first), and a buffered flush's as it takes the lock: a call cut
// before that ran nothing. It catches what wroteNothing cannot, a call cut
// while another goroutine of its process wrote.
func unclaimed(fl *inflight) bool { return !fl.claimed }

// wroteNothing reports whether fl's process attempted no write to any file
// while fl ran (faults.MemFS.WritesBy). Every change a call makes reaches
// the file through its own process's writes, the WAL's frames of the
// transaction that carries it, whichever of the process's goroutines leads
// that group commit; so a call whose process wrote nothing from its call to
// the moment its outcome was lost changed nothing, and it cannot change
// anything later: its process is dead, or it returned.
func wroteNothing(w *world, fl *inflight) bool {
	return w.m.WritesBy(fl.p.pid) == fl.writes
}

// noEffect leaves out of the history a call whose outcome a fault hid but
// which certainly changed nothing (leaveOut): each one left open doubles
// the search of the linearizability check.
func (w *world) noEffect(fl *inflight) {
	if w.tearing {
		return
	}
	w.stats.NoEffect++
	w.logf("p%d %s -> lost, nothing written: left out", fl.p.pid, *fl.in)
}

// durability is how a call that answered out committed: FULL when it
// granted a lease (a Lease, or an Update that granted one and committed),
// or, on SyncFull handles (syncFull), when it was a write that succeeded;
// NORMAL otherwise.
func durability(in model.Input, out model.Output, syncFull bool) linearizability.Durability {
	if out.Err != model.ErrNone {
		return linearizability.Normal
	}
	switch in.Kind {
	case model.Lease:
		return linearizability.Full
	case model.Get, model.TTL:
		return linearizability.Normal
	case model.Update:
		for i, sub := range out.Sub {
			if i < len(in.Ops) && in.Ops[i].Kind == model.Lease && sub.Err == model.ErrNone {
				return linearizability.Full
			}
		}
	}
	if syncFull && in.Kind != model.Flush && in.Kind != model.Sweep {
		return linearizability.Full
	}
	return linearizability.Normal
}

// record appends op, made by p, to the history and feeds the checks that
// follow the run as it goes.
func (w *world) record(p *process, op linearizability.Op) {
	if w.tearing {
		return
	}
	if !op.Unknown && op.Event == linearizability.Verb && op.Call < w.lastDrop {
		// Called before a dropped sync and answered after it: its commit
		// may have come after the hole the drop left, which recovery
		// stops at, so a known answer says nothing of what survives.
		op = linearizability.Op{Client: op.Client, Input: op.Input, Call: op.Call, Return: op.Call, Unknown: true,
			Handle: op.Handle, Claimed: op.Claimed}
	}
	w.history = append(w.history, op)
	if op.Unknown {
		w.stats.Unknown++
	} else if !p.readOnly { // usedBy says why
		w.clock.done(op.Input.NowMillis, op.Call, op.Return, op.Durability == linearizability.Full)
	}
	w.logf("p%d %s", p.pid, op)
}

// claim gives op, the call fl, its handle and the tick at which the engine
// claimed its time (linearizability.Op.Claimed), when it ran in one hold of
// the handle's lock and the engine said its time: not a listing or a
// Sweep, which take the lock once a page or a batch (each claiming a
// time), nor a sweep statement, which deletes what expired by the time
// its sweep began (recorded with a Sweeping observer's inflight, whose
// claimAt is 0).
func (fl *inflight) claim(op linearizability.Op) linearizability.Op {
	switch op.Input.Kind {
	case model.Scan, model.Leases, model.Sweep:
		return op
	}
	if fl.claimed && fl.claimAt != 0 {
		op.Handle, op.Claimed = fl.p.handle, fl.claimAt
	}
	return op
}

// omit notes a call left out of the history.
func (w *world) omit(p *process, in model.Input) {
	if w.tearing {
		return
	}
	w.stats.Omitted++
	w.logf("p%d %s -> disk full, omitted", p.pid, in)
}

// flushObserver records p's flushes of buffered increments as Flush
// operations, whichever goroutine runs them (a client's Flush, the
// background flusher, Close), and checks that each takes exactly what p's
// clients buffered since the last one took its share.
type flushObserver struct {
	w *world
	p *process
}

// Flushing is told the deltas a flush took from the buffer.
func (o flushObserver) Flushing(d map[string]int64) (func(int64), func(int64, error, bool)) {
	w, p := o.w, o.p
	if w.tearing {
		return nil, func(int64, error, bool) {}
	}
	t := w.sched.cur
	if !maps.Equal(d, p.buffered) {
		w.violate(CheckBuffered, "p%d: a flush took %v from the buffer, but its clients had buffered %v since the last flush took its share",
			p.pid, d, p.buffered)
	}
	p.buffered = map[string]int64{}
	in := &model.Input{Kind: model.Flush, NowMillis: w.trueMillis + p.offset}
	for _, k := range slices.Sorted(maps.Keys(d)) {
		in.Ops = append(in.Ops, model.Input{Kind: model.IncrBy, Key: k, Delta: d[k]})
	}
	fl := &inflight{p: p, client: t.client, in: in, call: w.tick(), writes: w.m.WritesBy(p.pid)}
	t.flight = fl
	p.flushing = append(p.flushing, in)
	before := w.mark()
	// The time is recorded as the flush claims it: a flush a fault cuts
	// short is recorded as unknown at that time, not at its call, which is
	// earlier by what it waited for the lock (a key live at the call may
	// have expired by then).
	claimed := func(now int64) { in.NowMillis, fl.claimed, fl.claimAt = now, true, w.tick() }
	return claimed, func(now int64, err error, restored bool) {
		t.flight = nil
		w.flushEnded(t, p, in, err, restored)
		if now != 0 {
			in.NowMillis, fl.claimed = now, true
		}
		var fe *state.FlushError
		if errors.As(err, &fe) && len(fe.Kept) > 0 {
			// Only a remote store's flush writes some keys and keeps
			// others: a file's is one transaction.
			w.violate(CheckEngineError, "p%d: a flush of the file kept some deltas for the next flush and wrote others: %v", p.pid, err)
		}
		if err == nil || fe != nil {
			out := model.Output{Sub: make([]model.Output, len(in.Ops))}
			for i, sub := range in.Ops {
				if fe != nil {
					if kerr, ok := fe.Dropped[sub.Key]; ok {
						out.Sub[i].Err = w.errKind(p, kerr)
					}
				}
			}
			w.record(p, fl.claim(linearizability.Op{Client: fl.client, Input: *in, Output: out, Call: fl.call, Return: w.tick()}))
			if t.kind == kindEngine && err == nil {
				w.stats.BgFlushed++
			}
			return
		}
		f := w.classify(p, "flush", err, before)
		switch {
		case restored:
			for k, v := range d {
				p.buffered[k] += v
			}
			w.omit(p, *in)
		case f == failFull:
			// Close's flush: nothing was written, and the deltas are gone.
			w.omit(p, *in)
			w.counter.lostBuffered(d)
		default:
			w.recordUnknown(fl)
		}
		if f == failDead {
			w.stopOn(t, p, "handle failed")
		}
	}
}

// errKind maps an engine error to the model's, for a flush's dropped keys
// (checks.ErrKind, the one map); an error the model has no kind for is
// reported.
func (w *world) errKind(p *process, err error) model.ErrKind {
	k, ok := checks.ErrKind(err)
	if !ok {
		w.violate(CheckEngineError, "p%d flush dropped a key with an error the model has no kind for: %v", p.pid, err)
		return model.ErrInvalid
	}
	return k
}

// sweepObserver records each sweep statement of p, inline ones included,
// as the deletion of the keys it deleted: a Del at the sweep's cutoff that
// found none of them live (a sweep that deleted a live key fails that).
// One whose outcome a fault hid is an unknown Sweep at the cutoff: it may
// have deleted any key expired then. A sweep that deleted nothing is left
// out: it changed nothing. A statement is in flight from its start until
// it is told of (process.sweeps), not for the goroutine that runs it: a
// group commit's leader runs the sweep batches others queued, each told
// of by the goroutine that queued it once its commit is synced, and then
// the leader's own inline sweep; a process that dies between a sweep's
// commit and its telling leaves an unknown sweep.
type sweepObserver struct {
	w *world
	p *process
}

// Sweeping is told of a sweep statement about to run.
func (o sweepObserver) Sweeping(cutoff int64, inline bool) func([]string, error) {
	w, p := o.w, o.p
	if w.tearing {
		return func([]string, error) {}
	}
	t := w.sched.cur
	if t.sweeper == 0 {
		t.sweeper = w.newClient()
	}
	in := &model.Input{Kind: model.Sweep, NowMillis: cutoff}
	fl := &inflight{p: p, client: t.sweeper, in: in, call: w.tick(), claimed: true, writes: w.m.WritesBy(p.pid)}
	p.sweeps = append(p.sweeps, fl)
	before := w.mark()
	return func(keys []string, err error) {
		p.sweeps = slices.DeleteFunc(p.sweeps, func(f *inflight) bool { return f == fl })
		if p.watch != nil {
			if err == nil {
				p.watch.deleted = append(p.watch.deleted, keys...)
			} else {
				p.watch.cutoffMax = max(p.watch.cutoffMax, cutoff)
			}
		}
		if err == nil {
			if cur := w.sched.cur; cur != nil && !inline {
				cur.swept += len(keys) // a Sweep's own: not an inline one its thread ran for another verb
			}
			if t.kind == kindEngine {
				w.stats.BgSwept += len(keys)
			}
			if len(keys) > 0 {
				del := model.Input{Kind: model.Del, Keys: keys, NowMillis: cutoff}
				w.record(p, linearizability.Op{Client: fl.client, Input: del, Output: model.Output{N: 0},
					Call: fl.call, Return: w.tick()})
				w.recipeSwept(keys, cutoff, fl.call, w.events)
			}
			return
		}
		f := w.classify(p, "sweep", err, before)
		if f == failFull {
			w.omit(p, *in)
			return
		}
		w.recordUnknown(fl)
		if f == failDead {
			w.stopOn(t, p, "handle failed")
		}
	}
}
