package sim

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/statekit/statekit/internal/bugs"
)

// Bounds on a run's size: put a limit on everything.
const (
	// MaxOps bounds Config.Ops.
	MaxOps = 100_000
	// MaxProcs bounds Config.Procs.
	MaxProcs = 8
	// MinKeys and MaxKeys bound Config.Keys.
	MinKeys, MaxKeys = 1, 8
	// MaxGoroutines bounds Config.Goroutines.
	MaxGoroutines = 8
)

// Rates are the probabilities, per client operation, that the simulator
// injects each kind of fault just before it. A rate of 0 turns the fault off.
type Rates struct {
	PowerLoss    float64 // cut the power between operations (drop, keep or tear)
	MidOp        float64 // arm a power cut at one of the next few mutating disk calls (faults.Stats.Mutations); restarts arm one too, as their Close begins
	Crash        float64 // kill one process: its buffered increments are lost
	Restart      float64 // close one process cleanly and start it again
	Pause        float64 // stop one process for longer than its leases
	WallStep     float64 // step the wall clock back or forward
	IOError      float64 // fail one of the next few reads or writes
	SyncError    float64 // fail one of the next few syncs (fsyncgate)
	DiskFull     float64 // fill the disk for a few operations
	DirSyncError float64 // fail one of the next few directory syncs (EIO): what they were to make durable a power loss may undo until one succeeds
	Inspect      float64 // a visit by statectl: a process of its own opens the file, reads, lists or writes a few keys and closes (not a fault: a program users run beside theirs)
	Foreign      float64 // another program on the file: plain SQLite switches it to rollback mode and, two times in three, is killed in a write before its commit; or it writes or keeps a read snapshot in WAL mode beside the processes (foreign.go); 0 in a default run
}

// DefaultRates are the fault rates of a default run: a few faults of each
// kind in a run of DefaultOps operations.
var DefaultRates = Rates{
	PowerLoss:    0.004,
	MidOp:        0.004,
	Crash:        0.006,
	Restart:      0.006,
	Pause:        0.005,
	WallStep:     0.012,
	IOError:      0.003,
	SyncError:    0.003,
	DiskFull:     0.003,
	DirSyncError: 0.003,
	Inspect:      0.01,
}

// Defaults of a Config.
const (
	DefaultOps          = 500
	DefaultProcs        = 8
	DefaultGoroutines   = 4
	DefaultCheckTimeout = time.Minute
)

// Config is everything that decides a run: the same Config gives the same
// run, byte for byte.
type Config struct {
	// Seed decides everything random in the run.
	Seed uint64
	// Ops is how many client operations the run issues before its final
	// checks.
	Ops int
	// Procs is the largest number of simulated processes; each seed draws
	// between 1 and Procs.
	Procs int
	// Keys fixes the number of keys clients share; 0 lets each seed draw 3
	// to 5.
	Keys int
	// Goroutines is the largest number of client goroutines of one
	// process; each process draws between 1 and Goroutines each time it
	// starts. Beside them run the engine's own: the background sweeper,
	// flusher and checkpointer.
	Goroutines int
	// Rates are the fault rates.
	Rates Rates
	// SyncFull opens every process's handle with state.WithSync(SyncFull):
	// each write is durable before it is answered, and the history records
	// it so (FULL), so that a power loss must keep it.
	SyncFull bool
	// DropFailedSyncs makes the simulated disk drop the writes of a sync
	// that fails, as XFS was reported to, rather than keep them readable, as ext4
	// does (faults.MemFS.SetDropFailedSyncs).
	DropFailedSyncs bool
	// EvictFailedSyncs makes the simulated disk keep a failed sync's writes
	// readable, as ext4 does, but reclaim them a page at a time at seeded
	// later disk calls, and all that remain of a file at its last close, as
	// Linux may reclaim those clean pages (faults.MemFS.SetEvictFailedSyncs).
	// Each WAL page it evicts is recorded as a loss the processes survived.
	// It excludes DropFailedSyncs.
	EvictFailedSyncs bool
	// KeepUnwritten makes a failed sync leave the blocks it had to allocate
	// unwritten, as ext4 does on Linux 6.18: later writes there are lost at
	// a power loss unless written past the page cache
	// (faults.MemFS.SetKeepUnwritten).
	KeepUnwritten bool
	// Bugs are the planted bugs compiled into the engine for this run.
	Bugs bugs.Set
	// CheckTimeout bounds the linearizability search per partition; a partition
	// that runs out is reported as a violation, never skipped.
	CheckTimeout time.Duration
	// Trace, when not nil, receives one line per event of the run.
	Trace io.Writer
}

// DefaultConfig returns the configuration of a default run of seed.
func DefaultConfig(seed uint64) Config {
	return Config{
		Seed:         seed,
		Ops:          DefaultOps,
		Procs:        DefaultProcs,
		Goroutines:   DefaultGoroutines,
		Rates:        DefaultRates,
		CheckTimeout: DefaultCheckTimeout,
	}
}

// Validate returns an error naming the first setting out of range, or nil.
func (c Config) Validate() error {
	switch {
	case c.Ops < 1 || c.Ops > MaxOps:
		return fmt.Errorf("ops %d: want 1..%d", c.Ops, MaxOps)
	case c.Procs < 1 || c.Procs > MaxProcs:
		return fmt.Errorf("procs %d: want 1..%d", c.Procs, MaxProcs)
	case c.Goroutines < 1 || c.Goroutines > MaxGoroutines:
		return fmt.Errorf("goroutines %d: want 1..%d", c.Goroutines, MaxGoroutines)
	case c.Keys != 0 && (c.Keys < MinKeys || c.Keys > MaxKeys):
		return fmt.Errorf("keys %d: want 0 (random) or %d..%d", c.Keys, MinKeys, MaxKeys)
	case c.CheckTimeout < 0:
		return fmt.Errorf("check timeout %s: want >= 0", c.CheckTimeout)
	case c.DropFailedSyncs && c.EvictFailedSyncs:
		return fmt.Errorf("dropfailedsyncs and evictfailedsyncs: want one at most: a failed sync's pages are dropped at once, or evicted one at a time later")
	}
	for _, r := range c.Rates.list() {
		if !(*r.p >= 0 && *r.p <= 1) { // NaN too: no draw is ever below it
			return fmt.Errorf("rate %s %g: want 0..1", r.name, *r.p)
		}
	}
	if c.Rates.PowerLoss == 1 {
		return fmt.Errorf("rate powerloss 1: want below 1: at 1 the power goes before every operation, and none ever runs")
	}
	return nil
}

// rate names one field of Rates, for flags and replay lines.
type rate struct {
	name, usage string
	p           *float64
}

func (r *Rates) list() []rate {
	return []rate{
		{"powerloss", "power losses between operations", &r.PowerLoss},
		{"midop", "power cuts armed at one of the next disk calls that change it (writes, syncs, truncates, file creations and deletions, directory syncs), and within a restart's close", &r.MidOp},
		{"crash", "process crashes", &r.Crash},
		{"restart", "clean process restarts", &r.Restart},
		{"pause", "process pauses longer than a lease", &r.Pause},
		{"wallstep", "wall-clock steps back or forward", &r.WallStep},
		{"ioerror", "injected read and write errors", &r.IOError},
		{"syncerror", "injected sync errors (fsyncgate)", &r.SyncError},
		{"diskfull", "disk-full episodes", &r.DiskFull},
		{"dirsyncerror", "injected directory sync errors (EIO from fsync of a directory)", &r.DirSyncError},
		{"inspect", "statectl visits: a process opens the file, reads, lists or writes a few keys and closes", &r.Inspect},
		{"foreign", "another program (plain SQLite): it switches the file to rollback mode while no process has it open and, two times in three, is killed in a write before its commit; or it writes (killed before its commit) or keeps a read snapshot in WAL mode beside the processes", &r.Foreign},
	}
}

// Flags defines c's settings as flags of fs, with c's values as defaults:
// -seed, -ops, -procs, -goroutines, -keys, -syncfull, -dropfailedsyncs, -evictfailedsyncs, -keepunwritten, -bug, -timeout,
// -nofaults and one flag per fault rate. Call Flags on a Config, parse, then call Finish.
func (c *Config) Flags(fs *flag.FlagSet) *FlagState {
	st := &FlagState{c: c}
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "the seed of the run")
	fs.IntVar(&c.Ops, "ops", c.Ops, fmt.Sprintf("client operations per run (1..%d)", MaxOps))
	fs.IntVar(&c.Procs, "procs", c.Procs, fmt.Sprintf("most simulated processes; each seed draws 1..procs (1..%d)", MaxProcs))
	fs.IntVar(&c.Goroutines, "goroutines", c.Goroutines, fmt.Sprintf("most client goroutines per process; each start draws 1..goroutines (1..%d)", MaxGoroutines))
	fs.IntVar(&c.Keys, "keys", c.Keys, fmt.Sprintf("keys the clients share; 0: each seed draws 3..5 (else %d..%d)", MinKeys, MaxKeys))
	fs.DurationVar(&c.CheckTimeout, "timeout", c.CheckTimeout, "the linearizability search's time limit per partition (0: none)")
	fs.BoolVar(&c.SyncFull, "syncfull", c.SyncFull, "open every process with state.WithSync(state.SyncFull): every acknowledged write must survive a power loss")
	fs.BoolVar(&c.KeepUnwritten, "keepunwritten", c.KeepUnwritten, "a failed sync leaves the blocks it had to allocate unwritten, as ext4 does on Linux 6.18: what is written there later is lost at a power loss unless written past the page cache")
	fs.BoolVar(&c.DropFailedSyncs, "dropfailedsyncs", c.DropFailedSyncs, "a failed sync drops its writes from the simulated disk's page cache, as reported of XFS (default: they stay readable, as on ext4; Linux 6.18 kept them on XFS too)")
	fs.BoolVar(&c.EvictFailedSyncs, "evictfailedsyncs", c.EvictFailedSyncs, "a failed sync's writes stay readable in the simulated disk's page cache, as on ext4, until it reclaims them a page at a time at seeded later disk calls, and all that remain of a file when its last descriptor closes (excludes -dropfailedsyncs)")
	fs.Func("bug", "plant a bug, by name (repeat or comma-separate): "+strings.Join(bugs.Names(), ", "), st.addBug)
	fs.BoolVar(&st.noFaults, "nofaults", false, "set every fault rate to 0, except those its own flag sets")
	for _, r := range c.Rates.list() {
		fs.Var(&rateFlag{p: r.p, st: st}, r.name, "probability per operation of "+r.usage)
	}
	return st
}

// FlagState carries what Flags parsed that needs a second pass.
type FlagState struct {
	c        *Config
	noFaults bool
	set      []*float64 // rates given explicitly
}

func (st *FlagState) addBug(v string) error {
	for _, name := range strings.Split(v, ",") {
		b, err := bugs.Parse(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		st.c.Bugs = st.c.Bugs.With(b)
	}
	return nil
}

// Finish applies -nofaults (keeping rates given explicitly) and returns
// Validate's error for the result.
func (st *FlagState) Finish() error {
	if st.noFaults {
		for _, r := range st.c.Rates.list() {
			if !slices.Contains(st.set, r.p) {
				*r.p = 0
			}
		}
	}
	return st.c.Validate()
}

type rateFlag struct {
	p  *float64
	st *FlagState
}

func (f *rateFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*f.p, 'g', -1, 64)
}

func (f *rateFlag) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("not a number")
	}
	*f.p = v
	f.st.set = append(f.st.set, f.p)
	return nil
}

// Args returns the flags that reproduce c from the defaults, seed first,
// such as ["-seed", "7", "-bug", "no-hwm"].
func (c Config) Args() []string {
	d := DefaultConfig(c.Seed)
	args := []string{"-seed", strconv.FormatUint(c.Seed, 10)}
	if c.Ops != d.Ops {
		args = append(args, "-ops", strconv.Itoa(c.Ops))
	}
	if c.Procs != d.Procs {
		args = append(args, "-procs", strconv.Itoa(c.Procs))
	}
	if c.Goroutines != d.Goroutines {
		args = append(args, "-goroutines", strconv.Itoa(c.Goroutines))
	}
	if c.Keys != d.Keys {
		args = append(args, "-keys", strconv.Itoa(c.Keys))
	}
	if c.SyncFull {
		args = append(args, "-syncfull")
	}
	if c.KeepUnwritten {
		args = append(args, "-keepunwritten")
	}
	if c.DropFailedSyncs {
		args = append(args, "-dropfailedsyncs")
	}
	if c.EvictFailedSyncs {
		args = append(args, "-evictfailedsyncs")
	}
	if c.CheckTimeout != d.CheckTimeout {
		args = append(args, "-timeout", c.CheckTimeout.String())
	}
	if !c.Bugs.Empty() {
		args = append(args, "-bug", c.Bugs.String())
	}
	mine, defs := c.Rates.list(), d.Rates.list()
	off := 0 // default faults turned off
	for i, r := range mine {
		if *r.p == 0 && *defs[i].p != 0 {
			off++
		}
	}
	noFaults := off >= 2
	if noFaults {
		args = append(args, "-nofaults")
	}
	for i, r := range mine {
		if (noFaults && *r.p != 0) || (!noFaults && *r.p != *defs[i].p) {
			args = append(args, "-"+r.name, strconv.FormatFloat(*r.p, 'g', -1, 64))
		}
	}
	return args
}

// ReplayLine returns the command that replays the run, such as
// `statesim -seed 7 -bug no-hwm`.
func (c Config) ReplayLine() string {
	return "statesim " + strings.Join(c.Args(), " ")
}

// ParseReplay parses a replay line, as ReplayLine writes it (the leading
// "statesim" is optional), into a Config; what follows a '#' is a comment.
// It returns an error for an unknown flag or a setting out of range.
func ParseReplay(line string) (Config, error) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	args := strings.Fields(line)
	if len(args) > 0 && args[0] == "statesim" {
		args = args[1:]
	}
	cfg := DefaultConfig(0)
	fs := flag.NewFlagSet("statesim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	st := cfg.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, fmt.Errorf("replay %q: %w", line, err)
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("replay %q: unexpected %q", line, fs.Arg(0))
	}
	if err := st.Finish(); err != nil {
		return Config{}, fmt.Errorf("replay %q: %w", line, err)
	}
	return cfg, nil
}
