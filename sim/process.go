package sim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// process is one simulated process: a state.DB opened with its defaults
// (group commit, and the background sweeper, flusher and checkpointer, all
// threads of the scheduler) while it runs, its client threads, and the
// increments they buffered and no flush has taken.
type process struct {
	pid         int
	db          *state.DB // nil while the process is down or starting
	starting    bool      // an open task runs
	stopping    bool      // its clients are to end: a stop task runs
	incarnation int
	handle      int   // names its open handle in the history (linearizability.Op.Handle)
	offset      int64 // engine ms minus true ms: fixed while it runs
	lastNow     int64 // the latest engine time it used
	pausedUntil int64 // true ms it wakes at; 0 when not paused
	clients     []*client
	buffered    map[string]int64 // IncrBuffered since the last flush took them, by key
	injected    int64            // MemFS injected errors when it started
	noSpace     int64            // MemFS writes refused for space when it started
	timed       bool             // offset is known for this incarnation
	early       []claim          // engine times claimed before it was
	closeCut    armedCut         // a power cut to arm as its restart's Close begins
	// lost are the background flushes of its handle that lost deltas
	// since a Flush or Close last returned such errors (flushanswer.go).
	lost []checks.LostFlush
	// flushing are its handle's flushes in flight (flushanswer.go).
	flushing []*model.Input
	// sweeps are its sweep statements in flight, in the order they began:
	// a group commit's leader runs other goroutines' sweeps (and its own
	// inline one after them), and each is told of its end by the
	// goroutine that queued it, so they belong to no one thread.
	sweeps []*inflight
	// watch, while not nil, gathers what its sweeps do for the
	// verifier's info check (info.go).
	watch *sweepWatch
	// readOnly and reads are the inspector's current visit (inspect.go):
	// whether it opens the file read-only, and how many calls it makes.
	readOnly bool
	reads    int
}

// armedCut is a power cut to arm: at the nth mutating call from then, with
// loss mode mode; n == 0: none.
type armedCut struct {
	n    int64
	mode faults.LossMode
}

// client is a goroutine inside a process that calls verbs, with the leases
// it believes it holds.
type client struct {
	id    int
	owner string
	holds []hold // by lease index
}

// held returns the indexes of the leases c was granted and believes it
// still holds, in order.
func (c *client) held() []int {
	var out []int
	for i, h := range c.holds {
		if h.ok {
			out = append(out, i)
		}
	}
	return out
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
	failBusy          // another process held the lock past the busy timeout
	failOther         // anything else: the handle lives on
)

// mark is what the simulator knows when a call begins, to tell later which
// faults may explain its error.
type mark struct {
	stats  faults.Stats
	pauses int  // pauses begun so far, the foreign program's holds of the write lock among them
	paused bool // a process was paused, or the foreign program held the write lock
}

// mark returns the mark of now.
func (w *world) mark() mark {
	m := mark{stats: w.m.Stats(), pauses: w.pauses, paused: w.foreignHolding}
	for _, p := range w.procs {
		m.paused = m.paused || p.pausedUntil > 0
	}
	return m
}

// classify tells what err, returned by a call of p that began at mark
// before, means, and reports errors no injected fault explains.
func (w *world) classify(p *process, what string, err error, before mark) failure {
	if err == nil {
		return failNone
	}
	if !w.m.Powered() {
		return failCut
	}
	after := w.m.Stats()
	switch {
	case errors.Is(err, state.ErrDiskFull):
		if after.NoSpaceErrors == before.stats.NoSpaceErrors {
			w.violate(CheckEngineError, "p%d %s: %v, but the disk was not full", p.pid, what, err)
		}
		return failFull
	case errors.Is(err, state.ErrCorrupt):
		w.violate(CheckIntegrity, "p%d %s: %v", p.pid, what, err)
		return failDead
	case errors.Is(err, state.ErrIO):
		// Explained by an I/O error injected since p started, or by a full
		// disk since p started (an engine may end a handle on it, and every
		// goroutine's next call then sees the handle failed).
		if after.InjectedErrors == p.injected && after.NoSpaceErrors == p.noSpace && !w.holeExplains(err) {
			w.violate(CheckEngineError, "p%d %s: %v, but no I/O error was injected", p.pid, what, err)
		}
		return failDead
	case errors.Is(err, state.ErrBusy):
		// Explained only by a process that held the lock past the busy
		// timeout: one paused during the call.
		if !before.paused && w.pauses == before.pauses {
			w.violate(CheckEngineError, "p%d %s: %v, but no process was paused", p.pid, what, err)
		}
		return failBusy
	}
	w.violate(CheckEngineError, "p%d %s: unexpected error: %v", p.pid, what, err)
	return failOther
}

// holeText is what the engine's error says of a WAL that lost frames its
// shared index counts (state/walhole.go).
const holeText = "lost frames its index counts as committed"

// holeExplains reports whether err is the engine finding such a hole after
// a failed sync dropped the WAL's writes (droppedSync): the hole stays until
// every handle on the file has closed, so it explains the error in any
// process, one started after the drop too.
func (w *world) holeExplains(err error) bool {
	return w.lastDrop > 0 && strings.Contains(err.Error(), holeText)
}

// newClient returns a client id distinct from every other in the run.
func (w *world) newClient() int {
	w.nextClient++
	return w.nextClient
}

// start starts process p on a thread of its own, unless the power is off
// or p runs or starts already. It reports whether it started p.
func (w *world) start(p *process) bool {
	if w.ending || !w.m.Powered() || p.db != nil || p.starting {
		return false
	}
	p.starting = true
	fs := w.m.Process(p.pid) // now: a power loss before the task runs kills it
	tm := w.trueMillis
	w.sched.spawn(kindTask, fmt.Sprintf("p%d open@%d", p.pid, tm), p, w.newClient(), func(t *thread) { w.open(t, p, fs) })
	return true
}

// engineOptions returns the options p's engine opens with: the defaults
// (SyncFull with -syncfull), on the simulated disk and clock, its threads
// run by the scheduler.
func (w *world) engineOptions(p *process, fs *faults.ProcessFS, clock *procClock) []state.Option {
	e := hooks.Engine{
		Bugs:    w.cfg.Bugs,
		Sched:   procSched{s: w.sched, p: p},
		Flushes: flushObserver{w: w, p: p},
		Sweeps:  sweepObserver{w: w, p: p},
		Times: func(ms int64) {
			if !w.tearing {
				w.clock.claimed(w, p, ms)
			}
		},
		Nows: func(ms int64) {
			if !w.tearing {
				w.clock.nowRead(w, p, ms)
			}
		},
		CheckpointEvery:  w.checkpointEvery,
		InlineSweepEvery: w.inlineSweepEvery,
		SweepStepRows:    w.sweepStepRows,
		LossFound:        func(what string) { w.lossFound(p, what) },
	}
	opts := []state.Option{state.WithFS(fs), state.WithClock(clock),
		hooks.Option(e).(state.Option)}
	if p == w.inspector {
		opts = append(opts, state.WithoutBackground()) // as statectl opens the file
	}
	switch {
	case p.readOnly:
		opts = append(opts, state.WithReadOnly())
	case w.cfg.SyncFull:
		opts = append(opts, state.WithSync(state.SyncFull))
	}
	return opts
}

// lossFound is told that p's engine, looking after a failed sync, found
// writes the disk took back (in the WAL or in the database file). Only a
// disk that drops a failed sync's writes (-dropfailedsyncs), or evicts
// them a page at a time (-evictfailedsyncs), takes any back while the
// power stays on: on any other such a finding is wrong, and it makes every
// connection of every process rebuild the shared index. On a disk that
// evicts, the loss takes effect when the index is marked: the rebuild stops
// at the hole an eviction left, and so drops the commits other processes
// appended behind it since, which the eviction's own record (droppedSync)
// came before. So the mark is recorded as a loss the processes survived
// too.
func (w *world) lossFound(p *process, what string) {
	if w.tearing {
		return // the power is going: a read may see what it took back
	}
	w.logf("p%d found writes a failed sync took back: %s", p.pid, what)
	w.clock.marked(w.events) // it marks the index for rebuilding next
	if w.cfg.EvictFailedSyncs {
		w.lastDrop = w.tick()
		w.history = append(w.history, linearizability.SurvivedLossAt(w.lastDrop))
		w.clock.powerLost()
		w.needCheck = true
	}
	if !w.cfg.DropFailedSyncs && !w.cfg.EvictFailedSyncs {
		w.violate(CheckEngineError, "p%d found writes a failed sync took back (%s), but the disk keeps a failed sync's writes readable", p.pid, what)
	}
}

// open is the task that opens p's file, checks it after a recovery, and
// starts p's clients.
func (w *world) open(t *thread, p *process, fs *faults.ProcessFS) {
	if w.tearing {
		return // frozen before it began
	}
	before := w.mark()
	p.injected, p.noSpace = before.stats.InjectedErrors, before.stats.NoSpaceErrors
	start := w.clock.opening(w.events)
	clock := &procClock{w: w, startTrue: w.trueMillis}
	schemaSeen, errorsBefore := w.schemaSeen, w.errorCount()
	if !p.readOnly && w.rollbackMode {
		w.hotMaybe = true // its switch back to WAL mode may be cut short
	}
	db, err := state.Open(dbPath, w.engineOptions(p, fs, clock)...)
	w.stats.Opens++
	p.starting = false
	if err != nil && p.readOnly && !schemaSeen && openRefused(err) {
		w.logf("p%d open: no statekit file yet", p.pid)
		return
	}
	if err != nil && p.readOnly && w.foreignRefused(err) {
		w.logf("p%d open: a write outside the WAL not rolled back yet", p.pid)
		return
	}
	if err != nil {
		w.logf("p%d open failed: %s", p.pid, errClass(err))
		if w.classify(p, "open", err, before) == failDead {
			w.needCheck = true
			w.afterFailedSync()
		}
		return
	}
	if w.tearing {
		// Frozen at Open's last step (its view died with the machine),
		// it returned a handle only the teardown knows of.
		_ = db.Close()
		return
	}
	p.db, p.lost, p.flushing = db, nil, nil
	p.incarnation++
	p.handle = w.newHandle()
	p.pausedUntil = 0
	if !p.readOnly {
		w.schemaSeen, w.rollbackMode, w.hotMaybe, w.errorsAtOpen = true, false, false, errorsBefore
	}
	now := db.Now().UnixMilli()
	p.offset = now - w.trueMillis
	w.clock.opened(w, p, now, clock, w.clock.completedBefore(start, w.events))
	w.clock.started(w, p, now)
	p.buffered = map[string]int64{}
	p.clients = p.clients[:0]
	goroutines := 1
	if !p.readOnly {
		goroutines += w.rngLife.IntN(w.cfg.Goroutines)
	}
	for range goroutines {
		id := w.newClient()
		p.clients = append(p.clients, &client{id: id, owner: fmt.Sprintf("c%d", id), holds: make([]hold, len(w.leases))})
	}
	w.logf("p%d start #%d now=%d wall=%d clients=%d", p.pid, p.incarnation, now, w.wallMillis(), len(p.clients))
	if w.needCheck && !p.readOnly && !w.integrity(t, p) {
		return
	}
	if p == w.inspector {
		c := p.clients[0]
		w.sched.spawn(kindClient, fmt.Sprintf("p%d statectl", p.pid), p, c.id, func(t *thread) { w.inspectVisit(t, p, c) })
		return
	}
	for _, c := range p.clients {
		w.sched.spawn(kindClient, fmt.Sprintf("p%d c%d", p.pid, c.id), p, c.id, func(t *thread) { w.clientLoop(t, p, c) })
	}
}

// integrity runs state's Check (integrity_check and the invariants) on p:
// after every recovery, at the end, and in statectl's visits (on the live
// file, beside the writers; such a check is not the one after a recovery,
// which a writable open, after its repairs, still owes). It reports
// whether p still runs.
func (w *world) integrity(t *thread, p *process) bool {
	before := w.mark()
	findings, err := p.db.Check(w.observe(p, nil))
	w.stats.Checks++
	if err != nil {
		w.logf("p%d check failed: %s", p.pid, errClass(err))
		if w.classify(p, "check", err, before) == failDead {
			w.stopOn(t, p, "check failed")
			return false
		}
		return w.m.Powered()
	}
	w.logf("p%d check: %d findings", p.pid, len(findings))
	if w.m.Stats().InjectedErrors != before.stats.InjectedErrors {
		// integrity_check reports a failed read as a finding: the check
		// says nothing, run it again at the next open.
		w.stopOn(t, p, "read error during the check")
		return false
	}
	switch {
	case len(findings) > 0 && p.readOnly:
		w.violate(CheckIntegrity, "p%d (statectl) on the live file: %q", p.pid, findings)
	case len(findings) > 0:
		w.violate(CheckIntegrity, "p%d after a recovery: %q", p.pid, findings)
	}
	if !p.readOnly {
		w.needCheck = false
	}
	return true
}

// stopOn stops p from one of its own threads: after its handle failed, or
// a check could not run. The stop runs on a task of its own, which waits
// for p's clients to end.
func (w *world) stopOn(t *thread, p *process, why string) {
	if p.stopping || p.db == nil {
		return
	}
	w.logf("p%d killed: %s", p.pid, why)
	w.clock.ended(w.events, p.pid)
	w.needCheck = true
	w.afterFailedSync()
	w.stop(p, false)
}

// afterFailedSync arms, three times in four, a power cut within the next
// few writes and syncs once a sync of a file or a directory failed and a
// handle or an Open failed on it: what follows a failed sync (the handle's
// end, the WAL's repair, a checkpoint another connection runs, the next
// Open before its first sync makes a failed directory sync's changes
// durable) is where a power loss finds what the failure left behind.
func (w *world) afterFailedSync() {
	st := w.m.Stats()
	failed := st.InjectedSyncErrors + st.InjectedDirSyncErrors
	if failed == w.syncErrorsSeen {
		return
	}
	w.syncErrorsSeen = failed
	r := w.rngFault[faultMidOp]
	if r.IntN(4) != 0 && w.cfg.Rates.MidOp > 0 && !w.ending {
		mode, n := lossMode(r), 1+r.Int64N(afterSyncCallsMax)
		w.m.PowerLossAt(n, mode)
		w.logf("fault: power cut (%s) armed at mutating call %d, after a failed sync", mode, n)
	}
}

// stop closes p cleanly on a task of its own: its clients end after their
// current call, then Close flushes (recorded) and closes; restart starts p
// again after. A power cut the restart fault drew for p (closeCut) is armed
// as Close begins: a close writes, checkpoints and may delete the WAL, and
// the open after it makes a new one, in a handful of disk calls that a cut
// armed between operations seldom falls on.
func (w *world) stop(p *process, restart bool) {
	if p.stopping || p.db == nil {
		return
	}
	p.stopping = true
	db := p.db
	cut := p.closeCut
	p.closeCut = armedCut{}
	w.sched.spawn(kindTask, fmt.Sprintf("p%d stop", p.pid), p, w.newClient(), func(t *thread) {
		w.sched.park(func() bool { return !w.clientsLive(p) }, 0)
		if cut.n > 0 && restart && !w.ending && p.db == db {
			w.m.PowerLossAt(cut.n, cut.mode)
			w.logf("fault: power cut (%s) armed at mutating call %d, as p%d closes", cut.mode, cut.n, p.pid)
		}
		before := w.mark()
		err := db.Close()
		if p.db != db {
			return // the process died meanwhile (the teardown closes its handle)
		}
		w.flushAnswer(t, p, err, true)
		p.db, p.stopping = nil, false
		w.down(p)
		w.logf("p%d stop: %s", p.pid, errClass(err))
		var fe *state.FlushError
		if err != nil && !errors.As(err, &fe) && w.classify(p, "close", err, before) == failDead {
			w.needCheck = true
		}
		if restart {
			w.start(p)
		}
	})
}

// clientsLive reports whether a client thread of p has not ended.
func (w *world) clientsLive(p *process) bool {
	for _, t := range w.sched.threads {
		if t.proc == p && t.kind == kindClient && !t.done && !t.frozen {
			return true
		}
	}
	return false
}

// die ends p at once, as a crash or a power loss does: its threads freeze
// where they stand (what they had in flight is of unknown outcome), its
// buffered increments are lost, and its handle is left to the teardown.
func (w *world) die(p *process) {
	w.clock.ended(w.events, p.pid)
	w.sched.freeze(p)
	if p.db != nil {
		w.counter.lostBuffered(p.buffered)
		w.zombies = append(w.zombies, p.db)
	}
	p.db, p.starting, p.stopping, p.lost, p.flushing = nil, false, false, nil, nil
	if p == w.outsider {
		w.foreignHolding, w.foreignReading = false, false // its locks die with it
	}
	w.down(p)
}

// crash kills p: what it wrote stays, its buffered increments are lost.
func (w *world) crash(p *process) {
	w.m.Crash(p.pid)
	w.die(p)
	w.needCheck = true
	w.logf("p%d crash", p.pid)
}

// down forgets p's running state.
func (w *world) down(p *process) {
	p.timed, p.early = false, nil
	p.clients = nil
	p.buffered = nil
	p.pausedUntil = 0
	if w.probe != nil && w.probe.p == p {
		w.probe = nil
	}
}

// powerLoss cuts the power now with mode, or records a cut that a call
// already suffered.
func (w *world) powerLoss(mode faults.LossMode) {
	w.m.PowerLoss(mode)
	w.afterCut(true)
}

// droppedSync records a sync of the WAL, by process pid, that failed on a
// disk that drops a failed sync's writes (Config.DropFailedSyncs): to every
// read of the file from then on, the commits since its last good sync are
// gone, as a power loss takes them, though no process died. In the history
// it is a power loss the processes survived (the commits not yet durable
// may be lost, a prefix of them kept; a call in flight at it may take
// effect after it, as a call of another process that commits once the
// index is rebuilt does), and the clock check forgets what it took back. The database
// file's dropped writes are checkpoints' copies of pages the WAL still
// holds: no commit may be lost with them. Called inside the disk's Sync
// (faults.MemFS.SetOnDroppedSync): it touches no disk.
func (w *world) droppedSync(pid int, name string) {
	if w.tearing {
		return
	}
	w.clock.dropped(w.events, pid) // the WAL's frames or a checkpoint's pages
	if !strings.HasSuffix(name, "-wal") {
		return
	}
	w.lastDrop = w.tick()
	w.history = append(w.history, linearizability.SurvivedLossAt(w.lastDrop))
	w.clock.powerLost()
	w.needCheck = true
	w.logf("p%d's failed sync dropped what was not durable, as a power loss would", pid)
}

// afterCut records a power loss that has happened (explicit, or a cut armed
// with PowerLossAt that a call ran into), ends every process, waits a while
// with the power off, and turns it back on.
func (w *world) afterCut(explicit bool) {
	for _, p := range w.allProcs() {
		w.die(p)
	}
	loss := len(w.history)
	w.history = append(w.history, linearizability.PowerLossAt(w.tick()))
	if !explicit {
		w.stats.Faults["midop-cut"]++
	}
	if n := w.m.Stats().DirLosses; n > w.dirLossesSeen {
		w.dirLossesSeen = n
		w.stats.Faults["dir-loss"]++
	}
	w.logf("power loss")
	w.clock.powerLost()
	w.clock.marked(w.events) // no reader of the old index is left
	w.needCheck = true
	w.advance(1 + w.rngLife.Int64N(5000))
	if w.rngLife.IntN(4) == 0 {
		w.stepWall(w.rngLife)
	}
	w.m.Reboot()
	w.logf("reboot")
	w.history[loss].Recovered = w.recovered()
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
