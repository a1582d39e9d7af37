package sim

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// clientsMax bounds the clients of one process.
const clientsMax = 3

// process is one simulated process: a state.DB while it runs, its clients,
// and the increments it buffered and has not flushed.
type process struct {
	pid         int
	db          *state.DB // nil while the process is down
	incarnation int
	offset      int64 // engine ms minus true ms: fixed while it runs
	lastNow     int64 // the latest engine time it used
	pausedUntil int64 // true ms it wakes at; 0 when not paused
	clients     []*client
	bg          int              // the client id of its background work
	buffered    map[string]int64 // IncrBuffered since the last flush, by key
	injected    int64            // MemFS injected errors when it started
}

// client is a caller inside a process, with the leases it believes it holds.
type client struct {
	id    int
	owner string
	holds []hold // by lease index
}

// hold is a lease grant a client saw.
type hold struct {
	ok      bool
	token   int64
	expires int64 // engine ms
}

// failure is what an engine error means to the simulator.
type failure int

const (
	failNone  failure = iota
	failCut           // the power went during the call
	failFull          // the disk was full: nothing was written
	failDead          // an I/O error or corruption ended the handle
	failOther         // anything else: the handle lives on
)

// classify tells what err, returned by a call of p that began with MemFS
// stats before, means, and reports errors no injected fault explains.
func (w *world) classify(p *process, what string, err error, before faults.Stats) failure {
	if err == nil {
		return failNone
	}
	if !w.m.Powered() {
		return failCut
	}
	after := w.m.Stats()
	switch {
	case errors.Is(err, state.ErrDiskFull):
		if after.NoSpaceErrors == before.NoSpaceErrors {
			w.violate(CheckEngineError, "p%d %s: %v, but the disk was not full", p.pid, what, err)
		}
		return failFull
	case errors.Is(err, state.ErrCorrupt):
		w.violate(CheckIntegrity, "p%d %s: %v", p.pid, what, err)
		return failDead
	case errors.Is(err, state.ErrIO):
		// Explained by an I/O error injected since p started, or by a full
		// disk during the call (an engine may end a handle on it).
		if after.InjectedErrors == p.injected && after.NoSpaceErrors == before.NoSpaceErrors {
			w.violate(CheckEngineError, "p%d %s: %v, but no I/O error was injected", p.pid, what, err)
		}
		return failDead
	}
	w.violate(CheckEngineError, "p%d %s: unexpected error: %v", p.pid, what, err)
	return failOther
}

// newClient returns a client id distinct from every other in the run.
func (w *world) newClient() int {
	w.nextClient++
	return w.nextClient
}

// start starts process p, unless the power is off. It reports whether p
// runs.
func (w *world) start(p *process) bool {
	if !w.m.Powered() || p.db != nil {
		return p.db != nil
	}
	before := w.m.Stats()
	p.injected = before.InjectedErrors
	clock := &procClock{w: w, startTrue: w.trueMillis}
	db, err := state.Open(dbPath, state.WithFS(w.m.Process(p.pid)), state.WithClock(clock),
		state.WithoutBackground(), hooks.Option(hooks.Engine{Bugs: w.cfg.Bugs}).(state.Option))
	w.stats.Opens++
	if err != nil {
		w.logf("p%d open failed: %s", p.pid, errClass(err))
		switch w.classify(p, "open", err, before) {
		case failCut:
			w.afterCut(false)
		case failDead:
			w.needCheck = true
		}
		return false
	}
	p.db = db
	p.incarnation++
	p.pausedUntil = 0
	now := db.Now().UnixMilli()
	p.offset, p.lastNow = now-w.trueMillis, now
	w.clock.opened(w, p, now)
	p.buffered = map[string]int64{}
	p.bg = w.newClient()
	p.clients = p.clients[:0]
	for range 1 + w.rngLife.IntN(clientsMax) {
		id := w.newClient()
		p.clients = append(p.clients, &client{id: id, owner: fmt.Sprintf("c%d", id), holds: make([]hold, len(w.leases))})
	}
	w.logf("p%d start #%d now=%d wall=%d clients=%d", p.pid, p.incarnation, now, w.wallMillis(), len(p.clients))
	if w.needCheck {
		w.integrity(p)
	}
	return p.db != nil
}

// integrity runs state's Check (integrity_check and the invariants) on p:
// after every recovery, and at the end.
func (w *world) integrity(p *process) {
	w.now(p)
	before := w.m.Stats()
	findings, err := p.db.Check(w.ctx)
	w.stats.Checks++
	if err != nil {
		w.logf("p%d check failed: %s", p.pid, errClass(err))
		w.fail(p, w.classify(p, "check", err, before))
		return
	}
	w.logf("p%d check: %d findings", p.pid, len(findings))
	if w.m.Stats().InjectedErrors != before.InjectedErrors {
		// integrity_check reports a failed read as a finding: the check
		// says nothing, run it again at the next open.
		w.kill(p, "read error during the check")
		return
	}
	if len(findings) > 0 {
		w.violate(CheckIntegrity, "p%d after a recovery: %q", p.pid, findings)
	}
	w.needCheck = false
}

// fail handles what a failed call left: a power cut, or a dead handle.
func (w *world) fail(p *process, f failure) {
	switch f {
	case failCut:
		w.afterCut(false)
	case failDead:
		w.kill(p, "handle failed")
	}
}

// now returns the engine time p's next call will use, and checks it.
func (w *world) now(p *process) int64 {
	now := p.db.Now().UnixMilli()
	w.clock.used(w, p, now)
	return now
}

// stop closes p cleanly: it flushes (recorded), then closes.
func (w *world) stop(p *process) {
	w.flush(p)
	if p.db == nil {
		return // the flush cut the power or ended the handle
	}
	if len(p.buffered) > 0 {
		// The flush found the disk full; Close tries again, unseen.
		w.recordUnknownFlush(p)
	}
	w.now(p)
	before := w.m.Stats()
	err := p.db.Close()
	p.db = nil
	w.down(p)
	w.logf("p%d stop: %s", p.pid, errClass(err))
	if err != nil {
		switch w.classify(p, "close", err, before) {
		case failCut:
			w.afterCut(false)
		case failDead:
			w.needCheck = true
		}
	}
}

// crash kills p: what it wrote stays, its buffered increments are lost.
func (w *world) crash(p *process) {
	w.m.Crash(p.pid)
	w.counter.lostBuffered(p.buffered)
	_ = p.db.Close() // every call fails: the process is dead
	p.db = nil
	w.down(p)
	w.needCheck = true
	w.logf("p%d crash", p.pid)
}

// kill ends p after its handle failed: it closes what is left.
func (w *world) kill(p *process, why string) {
	if p.db == nil {
		return
	}
	w.counter.lostBuffered(p.buffered)
	_ = p.db.Close()
	p.db = nil
	w.down(p)
	w.needCheck = true
	w.logf("p%d killed: %s", p.pid, why)
}

// down forgets p's running state.
func (w *world) down(p *process) {
	p.clients = nil
	p.buffered = nil
	p.pausedUntil = 0
}

// powerLoss cuts the power now with mode, or records a cut that a call
// already suffered.
func (w *world) powerLoss(mode faults.LossMode) {
	w.m.PowerLoss(mode)
	w.afterCut(true)
}

// afterCut records a power loss that has happened (explicit, or a cut armed
// with PowerLossAt that a call ran into), ends every process, waits a while
// with the power off, and turns it back on.
func (w *world) afterCut(explicit bool) {
	w.history = append(w.history, linearizability.PowerLossAt(w.tick()))
	if !explicit {
		w.stats.Faults["midop-cut"]++
	}
	w.logf("power loss")
	for _, p := range w.procs {
		if p.db == nil {
			continue
		}
		w.counter.lostBuffered(p.buffered)
		_ = p.db.Close()
		p.db = nil
		w.down(p)
	}
	w.clock.powerLost()
	w.counter.powerLost()
	w.needCheck = true
	w.advance(1 + w.rngLife.Int64N(5000))
	if w.rngLife.IntN(4) == 0 {
		w.stepWall(w.rngLife)
	}
	w.m.Reboot()
	w.logf("reboot")
}

// flush writes p's buffered increments (a Flush op in the history).
func (w *world) flush(p *process) {
	if len(p.buffered) == 0 {
		return
	}
	in := model.Input{Kind: model.Flush, NowMillis: w.now(p)}
	for _, k := range slices.Sorted(maps.Keys(p.buffered)) {
		in.Ops = append(in.Ops, model.Input{Kind: model.IncrBy, Key: k, Delta: p.buffered[k]})
	}
	call := w.tick()
	before := w.m.Stats()
	err := p.db.Flush(w.ctx)
	var fe *state.FlushError
	if err == nil || errors.As(err, &fe) {
		out := model.Output{Sub: make([]model.Output, len(in.Ops))}
		for i, sub := range in.Ops {
			if fe != nil {
				if kerr, ok := fe.Dropped[sub.Key]; ok {
					out.Sub[i].Err = errKind(kerr)
				}
			}
		}
		w.record(p, linearizability.Op{Client: p.bg, Input: in, Output: out, Call: call, Return: w.tick()})
		p.buffered = map[string]int64{}
		return
	}
	f := w.classify(p, "flush", err, before)
	if f == failFull {
		w.omit(p, in) // the deltas went back into the buffer
		return
	}
	w.record(p, linearizability.Op{Client: p.bg, Input: in, Call: call, Return: call, Unknown: true})
	p.buffered = map[string]int64{}
	w.fail(p, f)
}

// recordUnknownFlush records the flush Close makes of what is still
// buffered, whose outcome the simulator cannot see.
func (w *world) recordUnknownFlush(p *process) {
	in := model.Input{Kind: model.Flush, NowMillis: w.now(p)}
	for _, k := range slices.Sorted(maps.Keys(p.buffered)) {
		in.Ops = append(in.Ops, model.Input{Kind: model.IncrBy, Key: k, Delta: p.buffered[k]})
	}
	call := w.tick()
	w.record(p, linearizability.Op{Client: p.bg, Input: in, Call: call, Return: call, Unknown: true})
	p.buffered = map[string]int64{}
}

// errClass names an error's class for the trace, without its text (which
// may hold addresses or host details): "ok", "io", "full", ...
func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, faults.ErrPowerLost):
		return "power-lost"
	case errors.Is(err, state.ErrDiskFull):
		return "full"
	case errors.Is(err, state.ErrIO):
		return "io"
	case errors.Is(err, state.ErrCorrupt):
		return "corrupt"
	case errors.Is(err, state.ErrBusy):
		return "busy"
	case errors.Is(err, state.ErrClosed):
		return "closed"
	}
	return "other"
}

// errKind maps an engine error to the model's, for a flush's dropped keys.
func errKind(err error) model.ErrKind {
	switch {
	case errors.Is(err, state.ErrNotInteger):
		return model.ErrNotInteger
	case errors.Is(err, state.ErrOverflow):
		return model.ErrOverflow
	}
	return model.ErrInvalid
}
