package sim

import "github.com/statekit/statekit/internal/checks"

// Flush answers: a background flush that neither wrote every delta it took
// nor put them back into the buffer (a dropped key, an I/O error that ended
// the handle) has no caller; the next Flush or Close of its handle must
// return its error, once, beside what its own flush did
// (checks.FlushAnswer). Flushes take the buffer's turn one at a time, and
// a Flush holds it from before it takes the kept errors until it returns,
// with no switch of goroutines between its giving the turn back and its
// caller's next step: so what a process's background flushes lost since
// its last Flush or Close returned is exactly what that call must return.

// CheckFlushAnswer names the flush-answer check.
const CheckFlushAnswer = checks.KindFlushAnswer

// flushEnded notes how a flush of d that t ran for p ended: a background
// flush's lost deltas, for the next Flush or Close to return; a Flush's or
// Close's own outcome, for its answer's check.
func (w *world) flushEnded(t *thread, p *process, d map[string]int64, err error, restored bool) {
	switch {
	case t.kind != kindEngine:
		t.own = checks.OwnFlush{Ran: true, Err: err}
	case err != nil && !restored:
		p.lost = append(p.lost, checks.LostFlush{Deltas: d, Err: err})
		w.stats.LostFlushes++
	}
}

// flushAnswer checks what a Flush or Close of p's handle returned (err),
// which t called, and forgets the lost flushes it had to return.
func (w *world) flushAnswer(t *thread, p *process, err error, isClose bool) {
	for _, v := range checks.FlushAnswer(err, p.lost, t.own, isClose) {
		w.violate(CheckFlushAnswer, "p%d: %s", p.pid, v.Detail)
	}
	p.lost, t.own = nil, checks.OwnFlush{}
}
