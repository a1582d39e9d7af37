package sim

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// Bounds of the main loop.
const (
	// stepsPerOp bounds the loop: a run that cannot issue its operations
	// within stepsPerOp*Ops steps (say no process can open the file) fails
	// the progress check.
	stepsPerOp = 20
	// finalLeaseMillis is the ttl of the lease grants that end a run.
	finalLeaseMillis = 1000
	// verifierOwner is the owner of the final grants.
	verifierOwner = "verifier"
)

// Run runs the simulation cfg describes and checks it. It returns an error
// only for a Config that fails Validate; a broken promise is a Violation in
// the Report. Runs in one OS process must not overlap: SQLite's random
// generator, which the run reseeds, is process-wide.
//
// A panic inside the run (an assertion in the engine, or in the simulator)
// ends it early with a CheckPanic violation; the other checks are then not
// run.
func Run(cfg Config) (rep *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	w := newWorld(cfg)
	defer func() {
		if r := recover(); r != nil {
			w.cfg.Trace = nil // it may be what panicked
			w.violate(CheckPanic, "%v\n%s", r, debug.Stack())
			w.abandon()
			rep, err = w.report(false), nil
		}
	}()
	w.logf("seed %d: %d processes, keys %v, leases %v, goroutines 1..%d, checkpoint every %d writes, inline sweep every %d, sweep steps of %d rows, bugs [%s]",
		cfg.Seed, len(w.procs), w.keys, w.leases, cfg.Goroutines, w.checkpointEvery, w.inlineSweepEvery, w.sweepStepRows, cfg.Bugs)
	w.run()
	w.finish()
	rep = w.report(w.stats.Ops >= w.cfg.Ops)
	if !w.teardown() {
		rep.Violations = append(rep.Violations, Violation{Check: CheckProgress,
			Detail: "the handles of processes that died could not be closed after the run: " + w.sched.describe()})
	}
	return rep, nil
}

// abandon closes what a panic left open, as well as it can.
func (w *world) abandon() {
	defer func() { _ = recover() }()
	w.sched.cur = nil
	w.teardown()
}

// teardown ends the threads of processes that died, and closes their
// handles, so that a run leaves no goroutine or handle behind. Nothing it
// does is recorded or checked: the run is over. It reports whether every
// thread ended.
func (w *world) teardown() bool {
	w.tearing, w.ending = true, true
	defer func() { w.tearing = false }()
	w.tickets, w.probe = 0, nil
	for _, p := range w.allProcs() {
		if p.db != nil {
			w.zombies = append(w.zombies, p.db)
			p.db = nil
		}
		p.pausedUntil, p.stopping = 0, true
	}
	for _, t := range w.sched.threads {
		t.frozen = false
	}
	for _, db := range w.zombies {
		w.sched.spawn(kindTask, "teardown", nil, 0, func(*thread) { _ = db.Close() })
	}
	w.zombies = nil
	return w.runUntil(func() bool { return len(w.sched.threads) == 0 })
}

// run issues cfg.Ops client operations, with time, process lives and faults
// between the moments one begins.
func (w *world) run() {
	for _, p := range w.procs {
		w.start(p)
	}
	for steps := 0; w.stats.Ops < w.cfg.Ops; steps++ {
		if steps > stepsPerOp*w.cfg.Ops+1000 {
			w.violate(CheckProgress, "only %d of %d operations in %d steps: no process could run", w.stats.Ops, w.cfg.Ops, steps)
			return
		}
		w.wake()
		w.lifecycle()
		w.inject()
		w.diskFullTick()
		w.passTime()
		w.tickets = 1
		if !w.runUntil(func() bool { return w.tickets == 0 }) {
			return
		}
	}
}

// threadStepsMax bounds the scheduling steps between two operations'
// beginnings: a run past it is stuck (a livelock) and fails the progress
// check.
const threadStepsMax = 200_000

// runUntil runs threads, and moves time when none can run, until done
// reports true. It reports false, after a progress violation, if the
// threads are stuck.
func (w *world) runUntil(done func() bool) bool {
	for n := 0; !done(); n++ {
		if n > threadStepsMax {
			w.violate(CheckProgress, "%d scheduling steps without progress: %s", n, w.sched.describe())
			return false
		}
		if w.sched.step() {
			if !w.m.Powered() {
				w.afterCut(false)
			}
			continue
		}
		switch w.idle() {
		case idleStarted:
			if !w.ending {
				return true // the world moves on (a full disk may empty) while it opens
			}
		case idleStuck:
			w.violate(CheckProgress, "deadlock: no thread can run, none sleeps: %s", w.sched.describe())
			return false
		}
	}
	return true
}

// What idle did.
const (
	idleWoke    = iota // time moved to a wake-up
	idleStarted        // a stopped process starts
	idleStuck          // nothing can move: a deadlock
)

// lifecycle starts the foreign program if it waits for a free file, and
// stopped processes, each with some chance per step.
func (w *world) lifecycle() {
	w.foreignStart()
	for _, p := range w.procs {
		if p.db == nil && w.rngLife.IntN(4) == 0 {
			w.start(p)
		}
	}
}

// idle moves on when no thread can run: to the first wake-up of a sleeping
// thread or paused process, or it starts the foreign program waiting for a
// free file, or a stopped process a little later.
func (w *world) idle() int {
	if w.wake() {
		return idleWoke
	}
	if wake := w.sched.nextWake(); wake > 0 {
		w.advance(wake - w.trueMillis)
		w.wake()
		return idleWoke
	}
	if w.foreignStart() {
		return idleWoke // a program of the user's, as the file is free
	}
	for _, p := range w.procs {
		if p.db == nil && !p.starting && !w.ending {
			w.advance(1 + w.rngLife.Int64N(50))
			w.start(p)
			return idleStarted
		}
	}
	return idleStuck
}

// passTime moves true time forward between steps: mostly not at all or a
// few ms, sometimes seconds, and sometimes to just before, at or after a
// deadline some call set, in one process's engine time.
func (w *world) passTime() {
	r := w.rngTime
	switch x := r.IntN(100); {
	case x < 40:
	case x < 80:
		w.advance(1 + r.Int64N(5))
	case x < 88:
		w.advance(5 + r.Int64N(200))
	case x < 92:
		w.advance(200 + r.Int64N(3000))
	default:
		w.toDeadline()
	}
}

// boundaryMillisMax bounds how far time jumps to reach a deadline.
const boundaryMillisMax = 10_000

// probe is a call the next operation makes at a deadline: in process p, a
// sweep (sometimes) and a read of key, or a grant of lease key by another
// owner.
type probe struct {
	p     *process
	key   string
	lease bool
	sweep bool
	kind  model.Kind // Get or TTL, for a key
}

// toDeadline moves time to one ms before (most often), at, or one ms after
// a deadline still ahead in a runnable process's engine time; there the
// next call is made by one of that process's clients: a read of the key,
// after a sweep most often, or a grant of the lease, by another owner.
// Expiry is decided to the millisecond, so this is where off-by-one bugs
// show; the next calls favour the key too.
func (w *world) toDeadline() {
	r := w.rngTime
	pick, delta := r.IntN(deadlinesKept), []int64{-1, -1, 0, 1}[r.IntN(4)]
	pi, sweep, probeKind := r.IntN(MaxProcs), r.IntN(3) != 0, r.IntN(2)
	leases := r.IntN(10) < 3
	procs := w.runnable()
	if len(procs) == 0 {
		return
	}
	p := procs[pi%len(procs)]
	var ahead []deadline
	list := w.deadlines[0]
	if leases {
		list = w.deadlines[1]
	}
	for _, d := range list {
		if need := d.millis + delta - (w.trueMillis + p.offset); need >= 0 && need <= boundaryMillisMax {
			ahead = append(ahead, d)
		}
	}
	if len(ahead) == 0 {
		return
	}
	d := ahead[pick%len(ahead)]
	w.advance(d.millis + delta - (w.trueMillis + p.offset))
	w.logf("p%d at deadline %d%+d of %q", p.pid, d.millis, delta, d.key)
	w.probe = &probe{p: p, key: d.key, lease: d.lease, sweep: sweep && !d.lease,
		kind: []model.Kind{model.Get, model.TTL}[probeKind]}
}

// runProbe makes the call pr asks for, as client c of p.
func (w *world) runProbe(t *thread, p *process, c *client, pr *probe) {
	if pr.sweep {
		w.sweep(t, p)
		if p.stopping {
			return // the sweep met a fault
		}
	}
	if pr.lease {
		li := slices.Index(w.leases, pr.key)
		in := model.Input{Kind: model.Lease, Key: pr.key, Owner: c.owner, TTLMillis: leaseTTLMin}
		out, known := w.verb(t, p, c.id, &in)
		w.leaseOutcome(c, li, in, out, known)
		return
	}
	w.focusKey, w.focusLeft = pr.key, focusOps
	w.verb(t, p, c.id, &model.Input{Kind: pr.kind, Key: pr.key})
}

// finish ends a run: faults off, every process woken and closed cleanly,
// then a verifier process opens the file, checks it, reads every key and
// grants every lease once, and closes; then the handles of processes that
// died are torn down.
func (w *world) finish() {
	w.logf("finish")
	w.m.PowerLossAt(0, faults.LossDrop)
	for _, op := range []faults.Op{faults.OpRead, faults.OpWrite, faults.OpSync, faults.OpTruncate, faults.OpSyncDir} {
		w.m.FailAt(op, 0)
	}
	w.m.SetWriteBudget(-1)
	w.diskFull = 0
	w.probe = nil
	for _, p := range w.allProcs() {
		if p.pausedUntil > w.trueMillis {
			w.advance(p.pausedUntil - w.trueMillis)
		}
	}
	w.wake()
	// Let what is starting or stopping finish, then stop everything.
	w.ending = true
	if !w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }) {
		return
	}
	for _, p := range w.allProcs() {
		w.stop(p, false)
	}
	if !w.runUntil(func() bool { return len(w.sched.threads) == w.frozenThreads() }) {
		return
	}
	w.advance(1 + w.rngLife.Int64N(1000))
	w.verify()
}

// frozenThreads counts the threads frozen for good.
func (w *world) frozenThreads() int {
	n := 0
	for _, t := range w.sched.threads {
		if t.frozen {
			n++
		}
	}
	return n
}

// verify opens the file in a fresh process, checks it, reads every key,
// lists every row, holds statectl info's counts to them (infoCheck),
// grants every lease once, and closes it.
func (w *world) verify() {
	v := &process{pid: len(w.procs) + 1}
	w.needCheck = true
	w.sched.spawn(kindTask, "verifier", v, w.newClient(), func(t *thread) {
		before := w.mark()
		v.injected, v.noSpace = before.stats.InjectedErrors, before.stats.NoSpaceErrors
		start := w.clock.opening(w.events)
		clock := &procClock{w: w, startTrue: w.trueMillis}
		db, err := state.Open(dbPath, w.engineOptions(v, w.m.Process(v.pid), clock)...)
		w.stats.Opens++
		if err != nil {
			w.classify(v, "open", err, before)
			return
		}
		v.db, v.handle = db, w.newHandle()
		now := db.Now().UnixMilli()
		v.offset = now - w.trueMillis
		w.clock.opened(w, v, now, clock, w.clock.completedBefore(start, w.events))
		w.clock.started(w, v, now)
		v.buffered = map[string]int64{}
		if !w.integrity(t, v) || w.needCheck {
			return
		}
		c := &client{id: t.client, owner: verifierOwner, holds: make([]hold, len(w.leases))}
		alive := func() bool { return v.db == db && !v.stopping }
		for _, k := range append(append([]string(nil), w.keys...), hitsKey) {
			if !alive() {
				return // a call met damage: the progress check says so
			}
			out, known := w.verb(t, v, c.id, &model.Input{Kind: model.Get, Key: k})
			if k == hitsKey && known {
				w.counter.read = true
				if out.Err == model.ErrNone {
					w.counter.final = out.Value.Int
				}
			}
			if alive() {
				w.verb(t, v, c.id, &model.Input{Kind: model.TTL, Key: k})
			}
		}
		if alive() {
			w.audit(t, v, c.id)
		}
		// Every row as a listing shows it, the expired ones and the free
		// leases too: what statectl dump --all and leases --all print.
		for _, kind := range []model.Kind{model.Scan, model.Leases} {
			if alive() {
				w.verb(t, v, c.id, &model.Input{Kind: kind, All: true})
			}
		}
		if !alive() || !w.infoCheck(t, v) {
			return
		}
		for _, name := range w.leases {
			if alive() {
				w.verb(t, v, c.id, &model.Input{Kind: model.Lease, Key: name, Owner: verifierOwner, TTLMillis: finalLeaseMillis})
			}
		}
		if !alive() {
			return
		}
		err = db.Close()
		v.db = nil
		w.logf("verifier stop: %s", errClass(err))
		if err != nil {
			w.classify(v, "close", err, before)
		}
	})
	if !w.runUntil(func() bool { return len(w.sched.threads) == w.frozenThreads() }) {
		return
	}
	if w.needCheck || !w.counter.read {
		w.violate(CheckProgress, "the verifier could not open and check the file after the run")
	}
}

// traceHash returns the hash of everything that happened, with the disk's
// counters.
func (w *world) traceHash() string {
	st := w.m.Stats()
	var buf [8]byte
	for _, n := range []int64{st.Opens, st.Reads, st.Writes, st.Syncs, st.Truncates, st.BytesWritten,
		st.InjectedErrors, st.NoSpaceErrors, st.PowerLosses, st.Crashes, w.sched.steps} {
		binary.LittleEndian.PutUint64(buf[:], uint64(n))
		w.hash.Write(buf[:])
	}
	return hex.EncodeToString(w.hash.Sum(nil)[:16])
}
