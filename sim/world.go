package sim

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
)

// The seed streams: one math/rand/v2 source per subsystem, all derived from
// Config.Seed, so that drawing more from one never shifts another.
const (
	streamShape uint64 = iota + 0x51a0001 // processes, keys, the start of time
	streamWork                            // the clients' operations
	streamTime                            // how far time moves between operations
	streamLife                            // when stopped processes start again
	_                                     // (was: when sweeps and flushes ran)
	streamFault                           // + fault kind: one stream per kind
)

// streamSched is the scheduler's stream: which thread runs next.
const streamSched uint64 = 0x51a1001

// streamForeign, streamForeignHold and streamForeignRead are the foreign
// program's second, third and fourth streams: whether it writes in WAL mode
// beside the processes, how long it holds the write lock then, and whether
// it reads instead and how long it keeps its snapshot (foreign.go).
const (
	streamForeign     uint64 = 0x51a2001
	streamForeignHold uint64 = 0x51a2002
	streamForeignRead uint64 = 0x51a2003
)

// dbPath is the statekit file's name on the simulated disk.
const dbPath = "sim.state"

// world is one simulated machine and everything that happened on it.
type world struct {
	cfg Config
	ctx context.Context
	m   *faults.MemFS

	rngWork, rngTime, rngLife  *rand.Rand
	rngTransfer                *rand.Rand // the transfer workload's (transfer.go)
	rngGroup                   *rand.Rand // the key-group workload's (groupkeys.go)
	rngFault                   [faultKinds]*rand.Rand
	rngForeign, rngForeignHold *rand.Rand
	rngForeignRead             *rand.Rand
	sched                      *scheduler

	trueMillis int64 // true virtual time since the run began
	wallBase   int64 // the wall clock, unix ms, at true time 0
	wallOffset int64 // the sum of every wall-clock step
	events     int64 // the event counter Call and Return come from
	handles    int   // handles opened so far (newHandle)
	lastDrop   int64 // the event of the last failed sync whose writes the disk dropped, or of the last WAL page of one it evicted (droppedSync); 0: none

	keys   []string               // the keys clients share (the counter key apart)
	seen   map[string]model.Value // the value each shared key was last seen to hold, for CAS
	leases []string               // the lease names
	procs  []*process

	nextClient     int
	tickets        int          // operations clients may begin now
	probe          *probe       // the call the next operation makes, at a deadline
	pauses         int          // process pauses begun so far
	syncErrorsSeen int64        // injected sync errors, of files and directories, a process end has followed
	dirLossesSeen  int64        // power losses that found a directory change not yet durable, counted so far
	zombies        []*state.DB  // handles of processes that died, for the teardown
	inspector      *process     // statectl's visits (inspect.go)
	outsider       *process     // the foreign program (foreign.go)
	foreignNext    *foreignPlan // a foreign program drawn, waiting to start
	rollbackMode   bool         // the foreign program may have switched the file to rollback mode, and no writable open has succeeded since
	foreignHolding bool         // the foreign program holds the write lock, as a paused process may
	foreignReading bool         // the foreign program keeps a read snapshot
	hotMaybe       bool         // a write outside the WAL (the foreign program's switch or write, or a writable open's switch back) may be left hot, and no writable open has succeeded since
	errorsAtOpen   int64        // the disk's injected errors and refused writes when the last writable open that succeeded began
	schemaSeen     bool         // a writable open succeeded since the file was last found without a schema
	tearing        bool         // the teardown runs: nothing more is recorded
	ending         bool         // the run is ending: no process starts again
	// The cadences of the engine's background work, drawn per seed so a
	// short run reaches them: writes between background checkpoints, and
	// between inline sweeps.
	checkpointEvery, inlineSweepEvery int
	sweepStepRows                     int // a sweep step's rows at most: sweeps of a few keys take several steps

	history []linearizability.Op
	hash    hash.Hash
	line    []byte

	fences     []*resource         // one per lease name
	fenceLog   []checks.FenceWrite // every write offered to them, in order
	topToken   []int64             // the highest token granted, per lease name
	deadlines  [2][]deadline       // recent deadlines worth stopping time at: of keys, of leases
	focusKey   string              // a key the next few operations favour
	focusLeft  int
	diskFull   int  // operations left in a disk-full episode
	needCheck  bool // the next open runs integrity_check: a recovery
	clock      clockCheck
	counter    counterCheck
	violations []Violation
	lin        linearizability.Result
	recipes    *recipeState // the recipe workload (recipes.go)
	stats      Stats
}

// Stats counts what a run did.
type Stats struct {
	Procs         int            // simulated processes
	Keys          int            // shared keys (plus the counter key)
	Ops           int            // client operations issued
	Recorded      int            // operations and events in the history
	Unknown       int            // operations whose outcome a fault hid
	NoEffect      int            // operations whose outcome a fault hid, left out: cut before the engine claimed their time, or their process wrote nothing while they ran
	Unclaimed     int            // of NoEffect, those cut before the engine claimed their time while their process wrote
	Omitted       int            // operations refused on a full disk, left out of the history
	Faults        map[string]int // faults injected, by kind (the rate flags' names; midop-cut counts armed cuts that fell, dir-loss the power losses that found a file's creation or deletion not yet durable)
	VirtualMillis int64          // true virtual time the run covered
	Opens         int            // process starts
	Checks        int            // integrity checks run
	Threads       int            // goroutines the scheduler ran: clients, the engine's, the simulator's tasks
	EngineThreads int            // of Threads, those the engine started: its sweeper, flusher and checkpointer
	Steps         int64          // scheduling steps: turns handed from one goroutine to another
	Overlapping   int            // recorded operations called while another was in flight
	LostFlushes   int            // background flushes that lost deltas, whose errors the next Flush or Close must return
	PartialDels   int            // Dels of the key group's keys alone that counted some of them, not none or all: checked only because the group is one partition
	NowReads      int            // answers of DB.Now (the rate limiters') the clock check held to their process's engine time
	BgSwept       int            // keys the engine's background sweeper deleted
	BgFlushed     int            // flushes of buffered increments by the engine's background flusher that wrote them
	Disk          faults.Stats   // the simulated disk's own counters at the end: the injected errors and refused writes that fired, not only those armed
}

// newWorld builds the machine of cfg, with nothing started.
func newWorld(cfg Config) *world {
	shape := rand.New(rand.NewPCG(cfg.Seed, streamShape))
	w := &world{
		cfg:         cfg,
		ctx:         context.Background(),
		m:           faults.NewMemFS(cfg.Seed),
		rngWork:     rand.New(rand.NewPCG(cfg.Seed, streamWork)),
		rngTime:     rand.New(rand.NewPCG(cfg.Seed, streamTime)),
		rngLife:     rand.New(rand.NewPCG(cfg.Seed, streamLife)),
		rngTransfer: rand.New(rand.NewPCG(cfg.Seed, streamTransfer)),
		rngGroup:    rand.New(rand.NewPCG(cfg.Seed, streamGroup)),
		hash:        sha256.New(),
		stats:       Stats{Faults: map[string]int{}},
		recipes:     newRecipeState(cfg.Seed),
		seen:        map[string]model.Value{},
	}
	w.m.SetDropFailedSyncs(cfg.DropFailedSyncs)
	w.m.SetEvictFailedSyncs(cfg.EvictFailedSyncs)
	w.m.SetKeepUnwritten(cfg.KeepUnwritten)
	switch {
	case cfg.DropFailedSyncs:
		w.m.SetOnDroppedSync(w.droppedSync)
	case cfg.EvictFailedSyncs:
		// A page evicted later is recorded as a dropped sync is (a WAL
		// page as a loss the processes survived), at the disk call that
		// evicted it, whoever made that call.
		w.m.SetOnDroppedSync(w.evictedPage)
	}
	w.sched = newScheduler(w, rand.New(rand.NewPCG(cfg.Seed, streamSched)))
	w.rngForeign = rand.New(rand.NewPCG(cfg.Seed, streamForeign))
	w.rngForeignHold = rand.New(rand.NewPCG(cfg.Seed, streamForeignHold))
	w.rngForeignRead = rand.New(rand.NewPCG(cfg.Seed, streamForeignRead))
	for k := range w.rngFault {
		w.rngFault[k] = rand.New(rand.NewPCG(cfg.Seed, streamFault+uint64(k)))
	}
	// 2026 and later, to the millisecond.
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	w.wallBase = start + shape.Int64N(5*365*24*3600*1000)
	nprocs := 1 + shape.IntN(cfg.Procs)
	nkeys := cfg.Keys
	if nkeys == 0 {
		nkeys = 3 + shape.IntN(3)
	}
	for i := range nkeys {
		w.keys = append(w.keys, "k"+strconv.Itoa(i))
	}
	w.leases = []string{"L0", "L1"}
	for range w.leases {
		w.fences = append(w.fences, &resource{})
		w.topToken = append(w.topToken, 0)
	}
	for pid := 1; pid <= nprocs; pid++ {
		w.procs = append(w.procs, &process{pid: pid})
	}
	w.inspector = &process{pid: inspectorPID, readOnly: true}
	w.outsider = &process{pid: foreignPID}
	w.m.Spare(foreignPID, true)
	w.checkpointEvery = 4 + shape.IntN(60)
	w.inlineSweepEvery = 2 + shape.IntN(30)
	w.sweepStepRows = 1 + shape.IntN(4)
	w.stats.Procs, w.stats.Keys = nprocs, nkeys
	vfs.SeedSQLiteRandomness(uint32((cfg.Seed*0x9e3779b97f4a7c15)>>32) | 1) // 0 means the host's entropy
	w.m.SetClock(func() time.Time { return time.UnixMilli(w.wallMillis()) })
	w.m.SetYield(func(int) { w.sched.park(nil, 0) })
	w.m.SetSleep(func(d time.Duration) { w.sched.sleep(d, nil) })
	return w
}

// evictedPage records a page of a failed sync of file name, by process
// pid, that the disk evicted from its page cache (Config.EvictFailedSyncs):
// reads of it see what the disk has from now on. It is recorded as
// droppedSync records a failed sync's drop: a page of the WAL as a loss
// the processes survived, one of the database file as a checkpoint's copy
// taken back. Called inside a disk call (faults.MemFS.SetOnDroppedSync): it
// touches no disk.
func (w *world) evictedPage(pid int, name string) {
	w.logf("disk evicted a page of %s that p%d's failed sync left in the page cache", name, pid)
	w.droppedSync(pid, name)
}

// wallMillis is the machine's wall clock, unix ms.
func (w *world) wallMillis() int64 { return w.wallBase + w.trueMillis + w.wallOffset }

// newHandle names a handle just opened, for the history.
func (w *world) newHandle() int {
	w.handles++
	return w.handles
}

// tick returns the next value of the event counter.
func (w *world) tick() int64 {
	w.events++
	return w.events
}

// advance moves true time forward by ms.
func (w *world) advance(ms int64) {
	if ms < 0 {
		panic("sim: time moved back")
	}
	if ms == 0 {
		return
	}
	w.trueMillis += ms
	w.logf("time +%dms", ms)
}

// logf records one event: into the trace hash, and to Config.Trace.
func (w *world) logf(format string, args ...any) {
	if w.tearing {
		return
	}
	w.line = w.line[:0]
	w.line = strconv.AppendInt(w.line, w.trueMillis, 10)
	w.line = append(w.line, ' ')
	w.line = fmt.Appendf(w.line, format, args...)
	w.line = append(w.line, '\n')
	w.hash.Write(w.line)
	if w.cfg.Trace != nil {
		w.cfg.Trace.Write(w.line)
	}
}

// violate records a broken promise.
func (w *world) violate(check, format string, args ...any) {
	w.addViolation(true, check, format, args...)
}

// inconclusive records a check that could not decide in its time limit. A
// time limit is wall-clock time, so whether it runs out depends on the
// machine: it fails the run but stays out of the trace hash, and one seed
// keeps one hash on a slow machine and a fast one.
func (w *world) inconclusive(check, format string, args ...any) {
	w.addViolation(false, check, format, args...)
}

// addViolation appends a violation; hashed, the trace hash sees its check.
func (w *world) addViolation(hashed bool, check, format string, args ...any) {
	if w.tearing {
		return
	}
	v := Violation{Check: check, Detail: fmt.Sprintf(format, args...)}
	w.violations = append(w.violations, v)
	if hashed {
		// The trace hashes the check only: a detail may quote an engine
		// error, whose text is not the simulation's to keep stable.
		w.logf("VIOLATION %s", v.Check)
	} else if w.cfg.Trace != nil {
		fmt.Fprintf(w.cfg.Trace, "INCONCLUSIVE %s\n", v.Check)
	}
	if w.cfg.Trace != nil {
		fmt.Fprintf(w.cfg.Trace, "  %s\n", v.Detail)
	}
}

// procClock is a simulated process's clock: the machine's wall clock, and a
// monotonic clock that counts true time since the process started.
type procClock struct {
	w         *world
	startTrue int64
	// The first wall-clock reading, the engine's at open, and the true
	// time it was taken at.
	wallRead, wallReadTrue int64
	read                   bool
}

func (c *procClock) Wall() time.Time {
	wall := c.w.wallMillis()
	if !c.read {
		c.wallRead, c.wallReadTrue, c.read = wall, c.w.trueMillis, true
	}
	return time.UnixMilli(wall)
}

func (c *procClock) Monotonic() time.Duration {
	return time.Duration(c.w.trueMillis-c.startTrue) * time.Millisecond
}

// Sleep is the engine's background wait (state.Sleeper): the calling
// thread sleeps d of true time, or until stop is closed.
func (c *procClock) Sleep(d time.Duration, stop <-chan struct{}) bool {
	return c.w.sched.sleep(d, func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	})
}

// runnable returns the processes that run and are neither stopping nor
// paused, in pid order.
func (w *world) runnable() []*process {
	var out []*process
	for _, p := range w.procs {
		if p.db != nil && !p.stopping && p.pausedUntil == 0 {
			out = append(out, p)
		}
	}
	return out
}

// running returns the processes that run, paused or not, in pid order.
func (w *world) running() []*process {
	var out []*process
	for _, p := range w.procs {
		if p.db != nil {
			out = append(out, p)
		}
	}
	return out
}

// deadline is a deadline some operation set: engine ms, and the key or
// lease name it belongs to.
type deadline struct {
	millis int64
	key    string
	lease  bool
}

// deadlinesKept bounds the deadlines the simulator remembers.
const deadlinesKept = 16

// noteDeadline remembers a deadline worth stopping time at: of a key, or
// of a lease when lease is set.
func (w *world) noteDeadline(ms int64, key string, lease bool) {
	if ms <= 0 {
		return
	}
	i := 0
	if lease {
		i = 1
	}
	ds := w.deadlines[i]
	if len(ds) == deadlinesKept {
		copy(ds, ds[1:])
		ds = ds[:deadlinesKept-1]
	}
	w.deadlines[i] = append(ds, deadline{ms, key, lease})
}
