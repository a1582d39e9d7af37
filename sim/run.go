package sim

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/model"
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
	w.logf("seed %d: %d processes, keys %v, leases %v, bugs [%s]", cfg.Seed, len(w.procs), w.keys, w.leases, cfg.Bugs)
	w.run()
	w.finish()
	return w.report(w.stats.Ops >= w.cfg.Ops), nil
}

// abandon closes what a panic left open, as well as it can.
func (w *world) abandon() {
	for _, p := range w.procs {
		if p.db != nil {
			func() {
				defer func() { _ = recover() }()
				_ = p.db.Close()
			}()
			p.db = nil
		}
	}
}

// run issues cfg.Ops client operations with time, background work, process
// lives and faults between them.
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
		w.background()
		procs := w.runnable()
		if len(procs) == 0 {
			w.idle()
			continue
		}
		w.clientStep(procs)
	}
}

// lifecycle starts stopped processes, each with some chance per step.
func (w *world) lifecycle() {
	for _, p := range w.procs {
		if p.db == nil && w.rngLife.IntN(4) == 0 {
			w.start(p)
		}
	}
}

// idle moves on when no process can run: to the first wake-up, or starts a
// stopped process.
func (w *world) idle() {
	wake := int64(0)
	for _, p := range w.procs {
		if p.db != nil && p.pausedUntil > 0 && (wake == 0 || p.pausedUntil < wake) {
			wake = p.pausedUntil
		}
	}
	if wake > w.trueMillis {
		w.advance(wake - w.trueMillis)
		return
	}
	for _, p := range w.procs {
		if p.db == nil && w.start(p) {
			return
		}
	}
	w.advance(1 + w.rngLife.Int64N(50))
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

// toDeadline moves time to one ms before (most often), at, or one ms after
// a deadline still ahead in a runnable process's engine time; there the
// process sometimes sweeps, and one of its clients calls at once: a read of
// the key, or a grant of the lease, by another owner. Expiry is decided to
// the millisecond, so this is where off-by-one bugs show; the next calls
// favour the key too.
func (w *world) toDeadline() {
	r := w.rngTime
	pick, delta := r.IntN(deadlinesKept), []int64{-1, -1, 0, 1}[r.IntN(4)]
	pi, ci, sweep, probe := r.IntN(MaxProcs), r.IntN(clientsMax), r.IntN(3) != 0, r.IntN(2)
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
	if sweep && !d.lease {
		w.sweep(p)
	}
	if p.db == nil {
		return // the sweep met a fault
	}
	c := p.clients[ci%len(p.clients)]
	if d.lease {
		li := slices.Index(w.leases, d.key)
		in := model.Input{Kind: model.Lease, Key: d.key, Owner: c.owner, TTLMillis: leaseTTLMin}
		out, known := w.verb(p, c.id, &in)
		w.leaseOutcome(c, li, in, out, known)
		return
	}
	w.focusKey, w.focusLeft = d.key, focusOps
	w.verb(p, c.id, &model.Input{Kind: []model.Kind{model.Get, model.TTL}[probe], Key: d.key})
}

// background runs a sweep or a flush in a runnable process now and then.
func (w *world) background() {
	r := w.rngBackground
	x := r.IntN(100)
	procs := w.runnable()
	if len(procs) == 0 {
		return
	}
	p := procs[r.IntN(len(procs))]
	switch {
	case x < 4:
		w.sweep(p)
	case x < 10:
		w.flush(p)
	}
}

// sweep runs Sweep in p, as its background work would.
func (w *world) sweep(p *process) {
	w.verb(p, p.bg, &model.Input{Kind: model.Sweep})
}

// finish ends a run: faults off, every process woken and closed cleanly,
// then a verifier process opens the file, checks it, reads every key and
// grants every lease once, and closes.
func (w *world) finish() {
	w.logf("finish")
	w.m.PowerLossAt(0, faults.LossDrop)
	for _, op := range []faults.Op{faults.OpRead, faults.OpWrite, faults.OpSync, faults.OpTruncate} {
		w.m.FailAt(op, 0)
	}
	w.m.SetWriteBudget(-1)
	w.diskFull = 0
	for _, p := range w.procs {
		if p.pausedUntil > w.trueMillis {
			w.advance(p.pausedUntil - w.trueMillis)
		}
	}
	w.wake()
	for _, p := range w.procs {
		if p.db != nil {
			w.stop(p)
		}
	}
	w.advance(1 + w.rngLife.Int64N(1000))
	v := &process{pid: len(w.procs) + 1}
	w.needCheck = true
	if !w.start(v) || w.needCheck {
		w.violate(CheckProgress, "the verifier could not open and check the file after the run")
		if v.db != nil {
			w.kill(v, "verifier")
		}
		return
	}
	c := v.clients[0]
	for _, k := range append(append([]string(nil), w.keys...), hitsKey) {
		out, known := w.verb(v, c.id, &model.Input{Kind: model.Get, Key: k})
		if k == hitsKey && known {
			w.counter.read = true
			if out.Err == model.ErrNone {
				w.counter.final = out.Value.Int
			}
		}
		w.verb(v, c.id, &model.Input{Kind: model.TTL, Key: k})
	}
	for _, name := range w.leases {
		w.verb(v, c.id, &model.Input{Kind: model.Lease, Key: name, Owner: verifierOwner, TTLMillis: finalLeaseMillis})
	}
	if v.db != nil {
		w.stop(v)
	}
}

// traceHash returns the hash of everything that happened, with the disk's
// counters.
func (w *world) traceHash() string {
	st := w.m.Stats()
	var buf [8]byte
	for _, n := range []int64{st.Opens, st.Reads, st.Writes, st.Syncs, st.Truncates, st.BytesWritten,
		st.InjectedErrors, st.NoSpaceErrors, st.PowerLosses, st.Crashes} {
		binary.LittleEndian.PutUint64(buf[:], uint64(n))
		w.hash.Write(buf[:])
	}
	return hex.EncodeToString(w.hash.Sum(nil)[:16])
}
