package stress

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/state"
)

// Driver settings.
const (
	// pollEvery is how often the driver looks at the clock, the op count
	// and the kill schedule.
	pollEvery = 5 * time.Millisecond
	// tailEvery is how often the driver reads the journals to count the
	// work done, when the run stops on Until.
	tailEvery = 100 * time.Millisecond
	// stopTimeout bounds how long a worker may take to finish its call and
	// close the file once told to stop; past it, it counts as hung.
	stopTimeout = time.Minute
	// stateFile and resourceFile are the run's files in Config.Dir.
	stateFile    = "stress.state"
	resourceFile = "fence.db"
)

// proc is one worker process: a slot's incarnation between two kills.
type proc struct {
	index     int // in driver.procs
	slot      int
	cfg       workerConfig // its clients are cfg.Client to cfg.sweepClient()
	stderr    string
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	ops       atomic.Int64 // calls done, as last reported
	killed    bool         // the driver sent SIGKILL
	done      chan struct{}
	launched  int64 // CLOCK_MONOTONIC just before it was started
	endNanos  int64 // CLOCK_MONOTONIC once the process was seen dead
	exitErr   error
	tail      tail // its journal, read while it runs
	tailedOut bool // tail failed; the work counts miss it
}

// name names p in messages: its first client.
func (p *proc) name() string { return fmt.Sprintf("c%d", p.cfg.Client) }

// owns reports whether client is one of p's.
func (p *proc) owns(client int) bool {
	return client >= p.cfg.Client && client <= p.cfg.sweepClient()
}

// driver runs the processes of one Run.
type driver struct {
	cfg      Config
	rng      *rand.Rand
	path     string
	resource string
	procs    []*proc // every process started, in order
	live     []*proc // the current process of each slot; slots from cfg.Processes on are read-only workers'
	report   *Report
	start    int64 // CLOCK_MONOTONIC when the run began: epoch 0
	clients  int   // client ids handed out so far
	work     *workCount
	redis    *redisRun // nil for a run on a file
	notes    [][]note  // each process's notes, read by check
}

// Run creates a state file in cfg.Dir, attacks it with cfg.Processes worker
// processes of cfg.Goroutines clients each (and cfg.Readers read-only ones
// beside them) and SIGKILLs, until cfg.Until is
// done (or cfg.Duration passes, or cfg.MaxOps calls are made, or a worker
// exits by itself, or ctx ends), stops the workers, and checks everything
// they recorded, an interrupted run's too. The Report lists every
// violation found, a run that stopped before doing cfg.Until among them;
// Run returns an error only when it could not run or check at all
// (ErrConfig for a bad Config, or what failed).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if _, ok := os.LookupEnv(workerEnv); ok {
		// A worker that runs Run would start workers of its own, and so on.
		return nil, fmt.Errorf("%w: Run called in a worker: call WorkerMain first in main or TestMain", ErrConfig)
	}
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: no Dir", ErrConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Exe == "" {
		if cfg.Exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("stress: %w", err)
		}
	}
	d := &driver{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(cfg.Seed, 0x57)),
		path:     filepath.Join(cfg.Dir, stateFile),
		resource: filepath.Join(cfg.Dir, resourceFile),
		live:     make([]*proc, cfg.Processes+cfg.Readers),
		report: &Report{Processes: cfg.Processes, Readers: cfg.Readers, Goroutines: cfg.Goroutines, StepClock: cfg.StepClock,
			Dir: cfg.Dir, Seed: cfg.Seed, Bugs: cfg.Bugs.String(), Wanted: cfg.Until},
	}
	d.work = newWorkCount(d.procOf, d.isSweeper)
	defer d.closeRedis()
	defer d.dropRunKeys() // after the check, before closeRedis
	if err := d.setup(); err != nil {
		return nil, err
	}
	start := time.Now()
	d.start = monotonicNanos()
	d.report.Stopped, err = d.attack(ctx)
	fmt.Fprintf(d.cfg.Log, "stress: stopping: %s\n", d.report.Stopped)
	d.stopAll()
	d.report.Elapsed = time.Since(start)
	fmt.Fprintf(d.cfg.Log, "stress: stopped after %v\n", d.report.Elapsed.Round(time.Millisecond))
	if err != nil {
		return nil, err
	}
	// An interrupted run is checked all the same: what ran, ran.
	if err := d.check(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	return d.report, nil
}

// setup creates the state file (or starts the Redis server) and the
// resource before any worker starts.
func (d *driver) setup() error {
	if d.cfg.Redis != nil {
		if err := d.setupRedis(); err != nil {
			return err
		}
		if err := probeRedis(d.redis.url); err != nil {
			return err
		}
		d.report.Redis = d.redis.addr
		d.report.NoPersistence = d.cfg.Redis.NoPersistence
	} else {
		db, err := state.Open(d.path)
		if err != nil {
			return fmt.Errorf("stress: %w", err)
		}
		if err := db.Close(); err != nil {
			return fmt.Errorf("stress: %w", err)
		}
	}
	r, err := openResource(d.resource)
	if err != nil {
		return fmt.Errorf("stress: %w", err)
	}
	return r.close()
}

// Why a run stopped, for Report.Stopped.
const (
	StoppedDuration = "its duration passed"
	StoppedWork     = "it had done the work asked"
	StoppedCap      = "it reached its time cap"
	StoppedMaxOps   = "it reached its bound on calls"
	// StoppedInterrupted: ctx ended, or SIGINT or SIGTERM ended a
	// worker (a Ctrl-C reaches a worker as it is started).
	StoppedInterrupted = "it was interrupted"
	// StoppedWorkerExited: a worker exited by itself (a KindWorker
	// violation), which is not started again.
	StoppedWorkerExited = "a worker exited by itself"
)

// attack runs the workers, killing and restarting them, until the work is
// done, or time, the op budget or ctx runs out, and says which.
func (d *driver) attack(ctx context.Context) (string, error) {
	for slot := range d.live {
		if err := d.launch(slot); err != nil {
			return "", err
		}
	}
	deadline := time.Now().Add(d.cfg.Duration)
	nextKill := d.killAfter()
	nextServerKill := d.serverKillAfter()
	nextTail := time.Now()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return StoppedInterrupted, nil
		case <-tick.C:
		}
		for slot, p := range d.live {
			select {
			case <-p.done:
				if d.redis != nil {
					d.awaitGone(p)
				}
				if signalled(p.exitErr) {
					p.killed = true // its calls were cut as by a kill
					d.live[slot] = nil
					return StoppedInterrupted, nil
				}
				d.report.violate(KindWorker, "worker %s exited by itself (%v): %s", p.name(), p.exitErr, stderrTail(p.stderr))
				// Whatever stopped it (a full disk, a file it cannot open)
				// would stop its successors too, one every poll.
				d.live[slot] = nil
				return StoppedWorkerExited, nil
			default:
			}
		}
		if !d.cfg.Until.IsZero() && time.Now().After(nextTail) {
			d.readJournals()
			nextTail = time.Now().Add(tailEvery)
			if d.done().covers(d.cfg.Until) {
				return StoppedWork, nil
			}
		}
		switch {
		case time.Now().After(deadline) && d.cfg.Until.IsZero():
			return StoppedDuration, nil
		case time.Now().After(deadline):
			return StoppedCap, nil
		case d.cfg.MaxOps > 0 && d.ops() >= d.cfg.MaxOps:
			return StoppedMaxOps, nil
		}
		if !nextKill.IsZero() && time.Now().After(nextKill) {
			if err := d.kill(d.rng.IntN(len(d.live))); err != nil {
				return "", err
			}
			nextKill = d.killAfter()
		}
		if !nextServerKill.IsZero() && time.Now().After(nextServerKill) {
			if err := d.killServer(); err != nil {
				return "", err
			}
			nextServerKill = d.serverKillAfter()
		}
	}
}

// readJournals feeds the work counts what the journals gained since the
// last read.
func (d *driver) readJournals() {
	for _, p := range d.procs {
		if p.tailedOut {
			continue
		}
		if err := p.tail.read(d.work.add); err != nil {
			fmt.Fprintf(d.cfg.Log, "stress: read %s while it runs: %v\n", p.tail.path, err)
			p.tailedOut = true
		}
	}
}

// done returns the work done so far, as the run goes on.
func (d *driver) done() Work {
	return Work{Calls: d.ops(), Kills: d.report.Kills, Grants: d.work.grants, Contended: d.work.contended, Swept: d.work.swept,
		ServerKills: d.report.ServerKills}
}

// isSweeper reports whether client records a worker's sweep statements.
func (d *driver) isSweeper(client int) bool {
	i := d.procOf(client)
	return i >= 0 && d.procs[i].cfg.sweepClient() == client && !d.cfg.StepClock
}

// procOf returns the index of the process a client belongs to (-1 for
// none).
func (d *driver) procOf(client int) int {
	i, found := slices.BinarySearchFunc(d.procs, client, func(p *proc, c int) int {
		switch {
		case c < p.cfg.Client:
			return 1
		case c > p.cfg.sweepClient():
			return -1
		}
		return 0
	})
	if !found {
		return -1
	}
	return i
}

// killAfter returns when the next kill is due: exponentially distributed
// with mean KillEvery, or the zero Time when there are no kills.
func (d *driver) killAfter() time.Time {
	if d.cfg.KillEvery < 0 {
		return time.Time{}
	}
	return time.Now().Add(time.Duration(d.rng.ExpFloat64() * float64(d.cfg.KillEvery)))
}

// ops returns the calls the workers have reported.
func (d *driver) ops() int {
	n := 0
	for _, p := range d.procs {
		n += int(p.ops.Load())
	}
	return n
}

// launch starts a new worker in slot, with client ids of its own: a
// read-only one in a slot from cfg.Processes on. A reader records no flush
// and no sweep, but takes their two ids all the same, as every worker does.
func (d *driver) launch(slot int) error {
	index := len(d.procs)
	first := d.clients + 1
	d.clients += d.cfg.Goroutines + 2
	p := &proc{
		index: index, slot: slot, done: make(chan struct{}),
		cfg: workerConfig{Path: d.path, Resource: d.resource,
			Journal: filepath.Join(d.cfg.Dir, fmt.Sprintf("journal-%04d.jsonl", index+1)),
			Notes:   filepath.Join(d.cfg.Dir, fmt.Sprintf("notes-%04d.jsonl", index+1)),
			Client:  first, Goroutines: d.cfg.Goroutines, StepClock: d.cfg.StepClock, ReadOnly: slot >= d.cfg.Processes,
			Seed: d.cfg.Seed, Bugs: d.cfg.Bugs.String(), StartNanos: d.start, EpochNanos: int64(d.cfg.EpochEvery)},
		stderr: filepath.Join(d.cfg.Dir, fmt.Sprintf("worker-%04d.stderr", index+1)),
	}
	p.tail.path = p.cfg.Journal
	if d.redis != nil {
		p.cfg.Path, p.cfg.Remote, p.cfg.WallClock = d.workerURL(index), true, d.redis.server != nil
	}
	raw, err := json.Marshal(p.cfg)
	if err != nil {
		return fmt.Errorf("stress: %w", err)
	}
	errFile, err := os.Create(p.stderr)
	if err != nil {
		return fmt.Errorf("stress: %w", err)
	}
	defer errFile.Close()
	p.cmd = exec.Command(d.cfg.Exe, d.cfg.Args...)
	p.cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
	p.cmd.Stderr = errFile
	ownGroup(p.cmd)
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return fmt.Errorf("stress: %w", err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("stress: %w", err)
	}
	p.launched = monotonicNanos()
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("stress: start worker: %w", err)
	}
	d.procs = append(d.procs, p)
	d.live[slot] = p
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if n, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil {
				p.ops.Store(n)
			}
		}
		p.exitErr = p.cmd.Wait()
		p.endNanos = monotonicNanos()
		close(p.done)
	}()
	return nil
}

// kill SIGKILLs the worker in slot, waits until it is dead, and starts its
// successor.
func (d *driver) kill(slot int) error {
	p := d.live[slot]
	select {
	case <-p.done:
		return nil // it exited by itself; the loop reports it
	default:
	}
	p.killed = true
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("stress: kill %s: %w", p.name(), err)
	}
	<-p.done
	if d.redis != nil {
		d.awaitGone(p)
	}
	d.report.Kills++
	if p.cfg.ReadOnly {
		d.report.ReaderKills++
	}
	fmt.Fprintf(d.cfg.Log, "stress: killed %s after %d calls\n", p.name(), p.ops.Load())
	return d.launch(slot)
}

// stopAll closes every live worker's stdin, which tells it to finish its
// call and close the file, and waits; a worker that does not stop within
// stopTimeout is killed and reported as hung.
func (d *driver) stopAll() {
	for _, p := range d.live {
		if p != nil {
			p.stdin.Close()
		}
	}
	timeout := time.After(stopTimeout)
	for _, p := range d.live {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-timeout:
			d.report.violate(KindWorker, "worker %s did not stop within %v: %s", p.name(), stopTimeout, stderrTail(p.stderr))
			p.killed = true
			_ = p.cmd.Process.Kill()
			<-p.done
			if d.redis != nil {
				d.awaitGone(p)
			}
			continue
		}
		if p.exitErr != nil && d.report.Stopped == StoppedInterrupted && signalled(p.exitErr) {
			p.killed = true // the interrupt reached it too: its calls were cut as by a kill
			continue
		}
		if p.exitErr != nil {
			d.report.violate(KindWorker, "worker %s failed at the end (%v): %s", p.name(), p.exitErr, stderrTail(p.stderr))
		}
	}
}

// stderrTail returns the end of a worker's stderr, for a report.
func stderrTail(path string) string {
	const max = 2000
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
