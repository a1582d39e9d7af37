package sim

import (
	"github.com/statekit/statekit/internal/drive"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
)

// verb runs *in on p for client c at p's engine time (which it sets in
// in.NowMillis), records it, and returns the answer and whether it is
// known. A call the disk refused for
// lack of space is left out of the history: the engine promises it wrote
// nothing, and the checker holds it to that.
func (w *world) verb(p *process, c int, inp *model.Input) (model.Output, bool) {
	inp.NowMillis = w.now(p)
	in := *inp
	call := w.tick()
	before := w.m.Stats()
	res := drive.Run(w.ctx, p.db, in)
	if res.Err == nil {
		w.record(p, linearizability.Op{Client: c, Input: in, Output: res.Out, Call: call, Return: w.tick(),
			Durability: durability(in, res.Out)})
		return res.Out, true
	}
	f := w.classify(p, in.Kind.String(), res.Err, before)
	if f == failFull {
		w.omit(p, in)
		return model.Output{}, false
	}
	// Open until the next power loss, or the end: a commit whose sync
	// failed can still surface when another process recovers the WAL.
	w.record(p, linearizability.Op{Client: c, Input: in, Call: call, Return: call, Unknown: true})
	w.fail(p, f)
	return model.Output{}, false
}

// durability is how a call that answered out committed: FULL when it
// granted a lease (a Lease, or an Update that granted one and committed),
// NORMAL otherwise.
func durability(in model.Input, out model.Output) linearizability.Durability {
	if out.Err != model.ErrNone {
		return linearizability.Normal
	}
	switch in.Kind {
	case model.Lease:
		return linearizability.Full
	case model.Update:
		for i, sub := range out.Sub {
			if i < len(in.Ops) && in.Ops[i].Kind == model.Lease && sub.Err == model.ErrNone {
				return linearizability.Full
			}
		}
	}
	return linearizability.Normal
}

// record appends op, made by p, to the history and feeds the checks that
// follow the run as it goes.
func (w *world) record(p *process, op linearizability.Op) {
	w.history = append(w.history, op)
	if op.Unknown {
		w.stats.Unknown++
	} else {
		w.clock.done(op.Input.NowMillis, op.Durability == linearizability.Full)
	}
	w.counter.observe(op)
	w.logf("p%d %s", p.pid, op)
}

// omit notes a call left out of the history.
func (w *world) omit(p *process, in model.Input) {
	w.stats.Omitted++
	w.logf("p%d %s -> disk full, omitted", p.pid, in)
}
