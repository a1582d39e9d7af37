package sim

import (
	"math/rand/v2"

	"github.com/statekit/statekit/faults"
)

// The fault kinds, in the order the simulator considers them each step.
const (
	faultPowerLoss = iota
	faultMidOp
	faultCrash
	faultRestart
	faultPause
	faultWallStep
	faultIOError
	faultSyncError
	faultDiskFull
	faultDirSyncError
	faultInspect
	faultForeign
	faultKinds
)

// faultNames name the kinds in Stats.Faults, as the rate flags do.
var faultNames = [faultKinds]string{
	faultPowerLoss: "powerloss", faultMidOp: "midop", faultCrash: "crash", faultRestart: "restart",
	faultPause: "pause", faultWallStep: "wallstep", faultIOError: "ioerror", faultSyncError: "syncerror",
	faultDiskFull: "diskfull", faultDirSyncError: "dirsyncerror", faultInspect: "inspect",
	faultForeign: "foreign",
}

// Bounds of the faults' draws.
const (
	midOpCallsMax     = 40    // a mid-op cut falls within this many mutating disk calls
	afterSyncCallsMax = 12    // ... and one armed after a failed sync, within this many
	closeCallsMax     = 16    // ... and one armed as a restart's Close begins, within this many
	ioErrorCallsMax   = 30    // an I/O error falls within this many reads or writes
	dirSyncCallsMax   = 3     // a directory sync error falls within this many directory syncs
	diskBudgetMax     = 16384 // bytes a full disk still takes
	diskFullOpsMax    = 15    // steps a disk-full episode lasts
	pauseMinMillis    = leaseTTLMin + leaseTTLSpan
	pauseSpanMillis   = 3000
	// One pause in three outlasts the engine's default busy timeout, so
	// that a process paused holding the file's lock has the others wait
	// out their whole budget and answer ErrBusy.
	longPauseMinMillis  = 5500
	longPauseSpanMillis = 2500
	downMillisMax       = 5000 // how long the power stays off
)

// rates returns cfg's rates by kind.
func (w *world) rates() [faultKinds]float64 {
	r := w.cfg.Rates
	return [faultKinds]float64{
		faultPowerLoss: r.PowerLoss, faultMidOp: r.MidOp, faultCrash: r.Crash, faultRestart: r.Restart,
		faultPause: r.Pause, faultWallStep: r.WallStep, faultIOError: r.IOError, faultSyncError: r.SyncError,
		faultDiskFull: r.DiskFull, faultDirSyncError: r.DirSyncError, faultInspect: r.Inspect,
		faultForeign: r.Foreign,
	}
}

// inject draws, kind by kind from the kind's own stream, whether to inject
// each fault now, and injects it.
func (w *world) inject() {
	rates := w.rates()
	for k := range faultKinds {
		r := w.rngFault[k]
		if r.Float64() >= rates[k] {
			continue
		}
		if w.injectOne(k, r) {
			w.stats.Faults[faultNames[k]]++
		}
	}
}

// injectOne injects a fault of kind k and reports whether there was
// anything to inject it into.
func (w *world) injectOne(k int, r *rand.Rand) bool {
	switch k {
	case faultPowerLoss:
		mode := lossMode(r)
		w.logf("fault: power loss (%s)", mode)
		w.powerLoss(mode)
	case faultMidOp:
		mode, n := lossMode(r), 1+r.Int64N(midOpCallsMax)
		w.m.PowerLossAt(n, mode)
		w.logf("fault: power cut (%s) armed at mutating call %d", mode, n)
	case faultCrash:
		procs := w.running()
		if w.inspector.db != nil {
			procs = append(procs, w.inspector) // statectl killed mid-read
		}
		if len(procs) == 0 {
			return false
		}
		w.crash(procs[r.IntN(len(procs))])
	case faultRestart:
		procs := w.runnable()
		if len(procs) == 0 {
			return false
		}
		p := procs[r.IntN(len(procs))]
		// Drawn whatever the rates, so that turning mid-op cuts off
		// shifts nothing else.
		mode, n, cut := lossMode(r), 1+r.Int64N(closeCallsMax), r.IntN(2) == 0
		w.logf("fault: restart p%d", p.pid)
		if cut && w.cfg.Rates.MidOp > 0 {
			p.closeCut = armedCut{n: n, mode: mode}
		}
		w.stop(p, true)
	case faultPause:
		return w.pause(r)
	case faultWallStep:
		w.stepWall(r)
	case faultIOError:
		op, n := faults.OpRead, 1+r.Int64N(ioErrorCallsMax)
		if r.IntN(2) == 0 {
			op = faults.OpWrite
		}
		w.m.FailAt(op, n)
		w.logf("fault: %s error armed at call %d", op, n)
	case faultSyncError:
		n := 1 + r.Int64N(ioErrorCallsMax/3)
		w.m.FailAt(faults.OpSync, n)
		w.logf("fault: sync error armed at call %d", n)
	case faultDirSyncError:
		// Directory syncs are few (a connection's first sync of the WAL
		// it opened syncs its directory, once): armed within the next few.
		n := 1 + r.Int64N(dirSyncCallsMax)
		w.m.FailAt(faults.OpSyncDir, n)
		w.logf("fault: directory sync error armed at call %d", n)
	case faultDiskFull:
		if w.diskFull > 0 {
			return false
		}
		budget := r.Int64N(diskBudgetMax)
		w.diskFull = 1 + r.IntN(diskFullOpsMax)
		w.m.SetWriteBudget(budget)
		w.logf("fault: disk full in %d bytes, for %d steps", budget, w.diskFull)
	case faultInspect:
		return w.inspect(r)
	case faultForeign:
		return w.foreign(r)
	}
	return true
}

// lossMode draws what a power loss does to unsynced writes.
func lossMode(r *rand.Rand) faults.LossMode {
	switch x := r.IntN(5); {
	case x < 2:
		return faults.LossDrop
	case x < 3:
		return faults.LossKeep
	}
	return faults.LossTear
}

// pause stops a runnable process, preferring one whose clients hold a
// lease, for longer than any lease lasts.
func (w *world) pause(r *rand.Rand) bool {
	procs := w.runnable()
	if i := w.inspector; i.db != nil && !i.stopping && i.pausedUntil == 0 {
		procs = append(procs, i) // statectl stopped (SIGSTOP, ^Z) holding what it reads
	}
	if len(procs) == 0 {
		return false
	}
	var holders []*process
	for _, p := range procs {
		if p.holdsLease() {
			holders = append(holders, p)
		}
	}
	if len(holders) > 0 && r.IntN(4) != 0 {
		procs = holders
	}
	p := procs[r.IntN(len(procs))]
	p.pausedUntil = w.trueMillis + pauseMinMillis + r.Int64N(pauseSpanMillis)
	if r.IntN(3) == 0 {
		p.pausedUntil = w.trueMillis + longPauseMinMillis + r.Int64N(longPauseSpanMillis)
	}
	w.pauses++
	w.logf("fault: pause p%d until %d", p.pid, p.pausedUntil)
	return true
}

// holdsLease reports whether a client of p believes it holds a lease.
func (p *process) holdsLease() bool {
	for _, c := range p.clients {
		for _, h := range c.holds {
			if h.ok {
				return true
			}
		}
	}
	return false
}

// wake resumes the paused processes whose time has come: each holder first
// writes its resource with the token it held before it slept. It reports
// whether it resumed any.
func (w *world) wake() bool {
	woke := false
	for _, p := range w.allProcs() {
		if p.db == nil || p.pausedUntil == 0 || p.pausedUntil > w.trueMillis {
			continue
		}
		p.pausedUntil, woke = 0, true
		w.logf("p%d wakes", p.pid)
		for _, c := range p.clients {
			for li, h := range c.holds {
				if h.ok {
					w.fenceWrite(c, li)
				}
			}
		}
	}
	return woke
}

// stepWall steps the wall clock back or forward: by up to a second, a
// minute or an hour.
func (w *world) stepWall(r *rand.Rand) {
	scale := []int64{1000, 60_000, 3_600_000}[r.IntN(3)]
	d := 1 + r.Int64N(scale)
	if r.IntN(2) == 0 {
		d = -d
	}
	w.wallOffset += d
	w.logf("fault: wall clock steps %+dms", d)
}

// diskFullTick ends a disk-full episode when its steps run out.
func (w *world) diskFullTick() {
	if w.diskFull == 0 {
		return
	}
	w.diskFull--
	if w.diskFull == 0 {
		w.m.SetWriteBudget(-1)
		w.logf("disk has room again")
	}
}
