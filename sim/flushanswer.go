package sim

import (
	"slices"

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/model"
)

// Flush answers: a background flush that neither wrote every delta it took
// nor put them back into the buffer (a dropped key, an I/O error that ended
// the handle) has no caller; the next Flush or Close of its handle must
// return its error, once, beside what its own flush did
// (checks.FlushAnswer). Flushes take the buffer's turn one at a time, and
// a Flush holds it from before it takes the kept errors until it returns,
// with no switch of goroutines between its giving the turn back and its
// caller's next step: so what a process's background flushes lost since
// its last Flush or Close returned is exactly what that call must return,
// and no flush of the handle can be in flight when it returns: a Flush
// that returned beside one did not wait for it, and the deltas it took,
// buffered before the Flush, are unwritten (a read after the Flush that
// misses them is no linearizability failure: the flush's write is
// concurrent with it).

// CheckFlushAnswer names the flush-answer check.
const CheckFlushAnswer = checks.KindFlushAnswer

// flushEnded notes how a flush (in: its deltas) that t ran for p ended: it
// is no longer in flight; a background flush's lost deltas are kept for
// the next Flush or Close to return; a Flush's or Close's own outcome, for
// its answer's check.
func (w *world) flushEnded(t *thread, p *process, in *model.Input, err error, restored bool) {
	p.flushing = slices.DeleteFunc(p.flushing, func(x *model.Input) bool { return x == in })
	switch {
	case t.kind != kindEngine:
		t.own = checks.OwnFlush{Ran: true, Err: err}
	case err != nil && !restored:
		d := map[string]int64{}
		for _, sub := range in.Ops {
			d[sub.Key] = sub.Delta
		}
		p.lost = append(p.lost, checks.LostFlush{Deltas: d, Err: err})
		w.stats.LostFlushes++
	}
}

// flushAnswer checks what a Flush or Close of p's handle returned (err),
// which t called, and forgets the lost flushes it had to return.
func (w *world) flushAnswer(t *thread, p *process, err error, isClose bool) {
	for _, in := range p.flushing {
		// Flush waits for a background flush in flight: once it returns,
		// everything buffered before its call has been written, or its
		// error is in the answer.
		w.violate(CheckFlushAnswer, "p%d: %s returned while a flush of its handle was in flight: %s", p.pid, callName(isClose), in)
	}
	for _, v := range checks.FlushAnswer(err, p.lost, t.own, isClose) {
		w.violate(CheckFlushAnswer, "p%d: %s", p.pid, v.Detail)
	}
	p.lost, t.own = nil, checks.OwnFlush{}
}

// callName names a Flush or a Close for a violation.
func callName(isClose bool) string {
	if isClose {
		return "Close"
	}
	return "Flush"
}
