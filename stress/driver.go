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
	// stopTimeout bounds how long a worker may take to finish its call and
	// close the file once told to stop; past it, it counts as hung.
	stopTimeout = time.Minute
	// stateFile and resourceFile are the run's files in Config.Dir.
	stateFile    = "stress.state"
	resourceFile = "fence.db"
)

// proc is one worker process: a slot's incarnation between two kills.
type proc struct {
	slot, client int
	journal      string
	stderr       string
	cmd          *exec.Cmd
	stdin        io.WriteCloser
	ops          atomic.Int64 // calls done, as last reported
	killed       bool         // the driver sent SIGKILL
	done         chan struct{}
	endNanos     int64 // CLOCK_MONOTONIC once the process was seen dead
	exitErr      error
}

// driver runs the processes of one Run.
type driver struct {
	cfg      Config
	rng      *rand.Rand
	path     string
	resource string
	procs    []*proc // every process started, in order
	live     []*proc // the current process of each slot
	report   *Report
	start    int64 // CLOCK_MONOTONIC when the run began: epoch 0
}

// Run creates a state file in cfg.Dir, attacks it with cfg.Processes worker
// processes and SIGKILLs until cfg.Duration or cfg.MaxOps, stops the
// workers, and checks everything they recorded. The Report lists every
// violation found; Run returns an error only when it could not run or
// check at all (ErrConfig for a bad Config, or what failed).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if _, ok := os.LookupEnv(workerEnv); ok {
		// A worker that runs Run would start workers of its own, and so on.
		return nil, fmt.Errorf("%w: Run called in a worker: call WorkerMain first in main or TestMain", ErrConfig)
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
		live:     make([]*proc, cfg.Processes),
		report:   &Report{Processes: cfg.Processes, Dir: cfg.Dir, Seed: cfg.Seed, Bugs: cfg.Bugs.String()},
	}
	if err := d.setup(); err != nil {
		return nil, err
	}
	start := time.Now()
	d.start = monotonicNanos()
	err = d.attack(ctx)
	d.stopAll()
	d.report.Elapsed = time.Since(start)
	if err != nil {
		return nil, err
	}
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	return d.report, nil
}

// setup creates the state file and the resource before any worker starts.
func (d *driver) setup() error {
	db, err := state.Open(d.path)
	if err != nil {
		return fmt.Errorf("stress: %w", err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("stress: %w", err)
	}
	r, err := openResource(d.resource)
	if err != nil {
		return fmt.Errorf("stress: %w", err)
	}
	return r.close()
}

// attack runs the workers, killing and restarting them, until time, the
// op budget or ctx runs out.
func (d *driver) attack(ctx context.Context) error {
	for slot := range d.live {
		if err := d.launch(slot); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(d.cfg.Duration)
	nextKill := d.killAfter()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for slot, p := range d.live {
			select {
			case <-p.done:
				d.report.violate(KindWorker, "worker c%d exited by itself (%v): %s", p.client, p.exitErr, tail(p.stderr))
				if err := d.launch(slot); err != nil {
					return err
				}
			default:
			}
		}
		if time.Now().After(deadline) || (d.cfg.MaxOps > 0 && d.ops() >= d.cfg.MaxOps) {
			return nil
		}
		if !nextKill.IsZero() && time.Now().After(nextKill) {
			if err := d.kill(d.rng.IntN(len(d.live))); err != nil {
				return err
			}
			nextKill = d.killAfter()
		}
	}
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

// launch starts a new worker in slot.
func (d *driver) launch(slot int) error {
	client := len(d.procs) + 1
	p := &proc{
		slot: slot, client: client, done: make(chan struct{}),
		journal: filepath.Join(d.cfg.Dir, fmt.Sprintf("journal-%04d.jsonl", client)),
		stderr:  filepath.Join(d.cfg.Dir, fmt.Sprintf("worker-%04d.stderr", client)),
	}
	raw, err := json.Marshal(workerConfig{Path: d.path, Resource: d.resource, Journal: p.journal,
		Client: client, Seed: d.cfg.Seed, Bugs: d.cfg.Bugs.String(),
		StartNanos: d.start, EpochNanos: int64(d.cfg.EpochEvery)})
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
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return fmt.Errorf("stress: %w", err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("stress: %w", err)
	}
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
		return fmt.Errorf("stress: kill c%d: %w", p.client, err)
	}
	<-p.done
	d.report.Kills++
	fmt.Fprintf(d.cfg.Log, "stress: killed c%d after %d calls\n", p.client, p.ops.Load())
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
			d.report.violate(KindWorker, "worker c%d did not stop within %v: %s", p.client, stopTimeout, tail(p.stderr))
			p.killed = true
			_ = p.cmd.Process.Kill()
			<-p.done
			continue
		}
		if p.exitErr != nil {
			d.report.violate(KindWorker, "worker c%d failed at the end (%v): %s", p.client, p.exitErr, tail(p.stderr))
		}
	}
}

// tail returns the end of a worker's stderr, for a report.
func tail(path string) string {
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
