package sim

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"time"

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/model"
)

// The scheduler. Every goroutine of the simulated world is a thread: each
// client of a process, each background goroutine its engine starts (sweeper,
// flusher, checkpointer), and the tasks that open and close processes. Real
// goroutines, one running at a time: a thread runs only while it holds the
// turn, and gives it back at each scheduling point: before each file call
// (read, write, sync, truncate, file and shared-memory lock), when it takes
// its handle's lock or joins the group-commit queue, when it waits (for a
// group, a checkpoint request, the end of background work), and when it
// sleeps (SQLite's busy wait, a background tick), which only true time
// passing ends. The scheduler picks the next thread from the seed among
// those that can run. Nothing else schedules: no thread blocks in Go on
// anything the scheduler does not know, so one seed gives one interleaving.

// The kinds of thread.
const (
	kindClient = iota // a client of a process, calling verbs
	kindEngine        // a goroutine the engine started (sweeper, flusher, checkpointer)
	kindTask          // the simulator's own: opening or closing a process
)

// thread is one simulated goroutine.
type thread struct {
	id     int
	kind   int
	name   string
	proc   *process // the process it runs in; nil for none
	client int      // the history's client id for what it records
	baton  chan struct{}
	ready  func() bool // nil: it can run; else it waits until ready reports true
	wakeAt int64       // true ms it sleeps until; 0: not sleeping
	stop   func() bool // ends a sleep early when it reports true
	frozen bool        // its process died: it never runs again, until teardown
	done   bool
	flight *inflight // the operation it has in flight, if any
	// own is what the flush of its Flush or Close call did, if it ran one.
	own checks.OwnFlush
	// swept counts the keys the sweep statements told on it deleted
	// (the sweeps of its Sweep call): what that Sweep must return.
	swept int

	sweeper int // the client id the sweeps it runs are recorded under; 0 until one
}

// inflight is an operation called and not yet returned.
type inflight struct {
	p       *process
	client  int
	in      *model.Input
	call    int64
	claimed bool  // the engine said what time it runs at (in.NowMillis)
	claimAt int64 // the tick at which it said so, the last time it did
	writes  int64 // its process's writes when it was called (MemFS.WritesBy)
}

// scheduler runs the threads of one world.
type scheduler struct {
	w       *world
	rng     *rand.Rand
	threads []*thread // live threads, in creation order
	cur     *thread   // the thread that holds the turn; nil: the simulator does
	back    chan struct{}
	nextID  int
	order   []int // scratch for pick
	steps   int64
	panic   any // what a thread panicked with, for the driver to raise
}

func newScheduler(w *world, rng *rand.Rand) *scheduler {
	return &scheduler{w: w, rng: rng, back: make(chan struct{})}
}

// spawn starts fn as a new thread of p (nil for none); it runs when picked.
func (s *scheduler) spawn(kind int, name string, p *process, client int, fn func(t *thread)) *thread {
	s.nextID++
	s.w.stats.Threads++
	if kind == kindEngine {
		s.w.stats.EngineThreads++
	}
	t := &thread{id: s.nextID, kind: kind, name: name, proc: p, client: client, baton: make(chan struct{})}
	s.threads = append(s.threads, t)
	go func() {
		<-t.baton
		defer func() {
			if r := recover(); r != nil {
				s.panic = fmt.Sprintf("%s: %v\n%s", t.name, r, debug.Stack())
			}
			t.done = true
			s.back <- struct{}{}
		}()
		fn(t)
	}()
	return t
}

// park gives the turn back until ready reports true (nil: at once) and, if
// wakeAt is set, true time reaches it. It must be called by the thread that
// holds the turn.
func (s *scheduler) park(ready func() bool, wakeAt int64) {
	t := s.cur
	if t == nil {
		panic("sim: a scheduling point outside any thread")
	}
	t.ready, t.wakeAt = ready, wakeAt
	s.back <- struct{}{}
	<-t.baton
}

// runnable reports whether t may be picked now, before its ready.
func (s *scheduler) runnable(t *thread) bool {
	switch {
	case t.done || t.frozen:
		return false
	case t.wakeAt > s.w.trueMillis && (t.stop == nil || !t.stop()):
		return false
	case t.proc != nil && t.proc.pausedUntil > 0:
		return false
	}
	return true
}

// step runs one thread, picked from the seed among those that can run,
// until its next scheduling point, and reports whether there was one.
func (s *scheduler) step() bool {
	s.order = s.order[:0]
	for i, t := range s.threads {
		if s.runnable(t) {
			s.order = append(s.order, i)
		}
	}
	s.rng.Shuffle(len(s.order), func(i, j int) { s.order[i], s.order[j] = s.order[j], s.order[i] })
	for _, i := range s.order {
		t := s.threads[i]
		if t.ready != nil && !t.ready() {
			continue
		}
		s.run(t)
		return true
	}
	return false
}

// run gives t the turn until it gives it back.
func (s *scheduler) run(t *thread) {
	t.ready, t.wakeAt, t.stop = nil, 0, nil
	s.cur = t
	s.steps++
	t.baton <- struct{}{}
	<-s.back
	s.cur = nil
	if t.done {
		s.threads = removeThread(s.threads, t)
	}
	if r := s.panic; r != nil && !s.w.tearing {
		s.panic = nil
		panic(r)
	}
}

// count returns how many live threads of kind there are, frozen ones aside.
func (s *scheduler) count(kind int) int {
	n := 0
	for _, t := range s.threads {
		if t.kind == kind && !t.frozen {
			n++
		}
	}
	return n
}

// describe lists the live threads and what each waits on, for a progress
// violation.
func (s *scheduler) describe() string {
	var b strings.Builder
	for _, t := range s.threads {
		state := "runnable"
		switch {
		case t.frozen:
			continue
		case t.proc != nil && t.proc.pausedUntil > 0:
			state = fmt.Sprintf("paused until %d", t.proc.pausedUntil)
		case t.wakeAt > s.w.trueMillis:
			state = fmt.Sprintf("sleeps until %d", t.wakeAt)
		case t.ready != nil:
			state = "waits"
		}
		fmt.Fprintf(&b, "\n  %s: %s", t.name, state)
	}
	return b.String()
}

func removeThread(ts []*thread, t *thread) []*thread {
	for i, x := range ts {
		if x == t {
			copy(ts[i:], ts[i+1:])
			ts[len(ts)-1] = nil
			return ts[:len(ts)-1]
		}
	}
	return ts
}

// nextWake returns the earliest true time at which a sleeping thread, or a
// paused process, wakes; 0 if none.
func (s *scheduler) nextWake() int64 {
	next := int64(0)
	for _, t := range s.threads {
		if t.done || t.frozen {
			continue
		}
		at := t.wakeAt
		if t.proc != nil && t.proc.pausedUntil > at {
			at = t.proc.pausedUntil
		}
		if at > s.w.trueMillis && (next == 0 || at < next) {
			next = at
		}
	}
	return next
}

// freeze stops every thread of p for good, as its process dies: what they
// had in flight is recorded as of unknown outcome.
func (s *scheduler) freeze(p *process) {
	for _, fl := range p.sweeps {
		s.w.recordUnknown(fl)
	}
	p.sweeps = nil
	for _, t := range s.threads {
		if t.proc == p && !t.frozen {
			t.frozen = true
			if t.flight != nil {
				s.w.recordUnknown(t.flight)
			}
			t.flight = nil
		}
	}
}

// procSched is the hooks.Scheduler of one process's engine.
type procSched struct {
	s *scheduler
	p *process
}

var _ hooks.Scheduler = procSched{}

// Go starts fn as a thread of the process, with a client id of its own.
func (ps procSched) Go(name string, fn func()) {
	ps.s.spawn(kindEngine, fmt.Sprintf("p%d#%d %s", ps.p.pid, ps.p.incarnation+1, name), ps.p, ps.s.w.newClient(), func(*thread) { fn() })
}

// Wait parks the calling thread until ready reports true.
func (ps procSched) Wait(ready func() bool) { ps.s.park(ready, 0) }

// sleep parks the calling thread for d of true time (at least a ms: the
// simulation's time is in ms), or until stop reports true, and reports
// whether d passed.
func (s *scheduler) sleep(d time.Duration, stop func() bool) bool {
	ms := max(1, int64((d+time.Millisecond-1)/time.Millisecond))
	until := s.w.trueMillis + ms
	s.cur.stop = stop
	s.park(nil, until)
	return s.w.trueMillis >= until
}
