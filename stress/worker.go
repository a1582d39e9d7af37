package stress

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/internal/drive"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// workerEnv carries a worker's configuration, as JSON, to the re-executed
// binary.
const workerEnv = "STATEKIT_STRESS_WORKER"

// Worker settings.
const (
	// workerBusyTimeout is long: a kill frees the locks at once, so only a
	// hang makes a worker wait this long, and its call is then unknown.
	workerBusyTimeout = 30 * time.Second
	// progressEvery is how many calls pass between two progress lines,
	// each the number of calls journaled so far.
	progressEvery = 16
)

// workerConfig is what the driver tells one worker process.
type workerConfig struct {
	Path     string `json:"path"`     // the state file
	Resource string `json:"resource"` // the fenced resource
	Journal  string `json:"journal"`  // this worker's journal
	Client   int    `json:"client"`   // unique over the run, restarts included
	Seed     uint64 `json:"seed"`
	Bugs     string `json:"bugs"` // bugs.Set.String()
	// StartNanos (CLOCK_MONOTONIC) and EpochNanos place every call in its
	// epoch, the same for every worker.
	StartNanos int64 `json:"start"`
	EpochNanos int64 `json:"epoch"`
}

// WorkerMain runs a stress worker and exits, when Run started this process
// as one; otherwise it returns at once. Call it first in main, or in
// TestMain before m.Run.
func WorkerMain() {
	raw, ok := os.LookupEnv(workerEnv)
	if !ok {
		return
	}
	if err := runWorker(raw, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stress worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// parseBugs reads a bugs.Set from its String form.
func parseBugs(s string) (bugs.Set, error) {
	var set bugs.Set
	for _, name := range strings.Split(s, ",") {
		if name == "" {
			continue
		}
		b, err := bugs.Parse(name)
		if err != nil {
			return set, err
		}
		set = set.With(b)
	}
	return set, nil
}

// worker is one worker process's state.
type worker struct {
	cfg     workerConfig
	ctx     context.Context
	db      *state.DB
	clock   *stepClock
	res     *resource
	journal *os.File
	load    workload
	seq     int64
	holding *state.Lease // the lease this worker holds, as far as it knows
}

// runWorker runs calls until stdin closes, then closes everything cleanly.
func runWorker(raw string, stdin io.Reader, stdout io.Writer) error {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	planted, err := parseBugs(cfg.Bugs)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	w := &worker{cfg: cfg, ctx: context.Background(), clock: newStepClock(),
		load: workload{rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Client)))}}
	w.journal, err = os.OpenFile(cfg.Journal, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer w.journal.Close()
	w.db, err = state.Open(cfg.Path, state.WithClock(w.clock), state.WithoutBackground(),
		state.WithBusyTimeout(workerBusyTimeout), hooks.Option(hooks.Engine{Bugs: planted}).(state.Option))
	if err != nil {
		return err
	}
	w.res, err = openResource(cfg.Resource)
	if err != nil {
		w.db.Close()
		return err
	}
	var stop atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		stop.Store(true)
	}()
	out := bufio.NewWriter(stdout)
	var reported int64
	for !stop.Load() {
		if err := w.step(); err != nil {
			w.db.Close()
			w.res.close()
			return err
		}
		if w.seq-reported >= progressEvery {
			reported = w.seq
			fmt.Fprintln(out, w.seq)
			if err := out.Flush(); err != nil {
				break // the driver is gone
			}
		}
	}
	return errors.Join(w.db.Close(), w.res.close())
}

// step makes one move: a lease holder's, a counter's or a key verb, on the
// keys of the current epoch.
func (w *worker) step() error {
	w.load.prefix = epochPrefix((monotonicNanos() - w.cfg.StartNanos) / max(w.cfg.EpochNanos, 1))
	switch r := w.load.rng.IntN(100); {
	case r < 35:
		return w.leaseStep()
	case r < 50:
		_, _, err := w.call(w.load.counter())
		return err
	default:
		_, _, err := w.call(w.load.plain(false))
		return err
	}
}

// owner is this worker's lease owner name: one per process, so a restarted
// worker is a new owner and waits for its predecessor's lease to expire.
func (w *worker) owner() string { return fmt.Sprintf("w%d", w.cfg.Client) }

// leaseStep asks for a lease when it holds none, and otherwise writes the
// fenced resource, renews, asks again (an extension), releases, or walks
// away and lets the lease expire.
func (w *worker) leaseStep() error {
	if w.holding == nil {
		name := w.load.pick(leaseNames)
		out, ok, err := w.call(model.Input{Kind: model.Lease, Key: name, Owner: w.owner(), TTLMillis: w.load.leaseTTL()})
		if err != nil || !ok || out.Err != model.ErrNone {
			return err
		}
		w.holding = &state.Lease{Name: name, Owner: w.owner(), Token: out.Token}
		return w.fencedWrite()
	}
	l := w.holding
	switch r := w.load.rng.IntN(100); {
	case r < 45:
		return w.fencedWrite()
	case r < 65:
		out, ok, err := w.call(model.Input{Kind: model.Renew, Key: l.Name, Owner: l.Owner, Token: l.Token, TTLMillis: w.load.leaseTTL()})
		if ok && out.Err == model.ErrLeaseLost {
			w.holding = nil
		}
		return err
	case r < 70:
		out, ok, err := w.call(model.Input{Kind: model.Lease, Key: l.Name, Owner: l.Owner, TTLMillis: w.load.leaseTTL()})
		if ok && out.Err == model.ErrNone {
			w.holding.Token = out.Token
		}
		return err
	case r < 95:
		w.holding = nil
		_, _, err := w.call(model.Input{Kind: model.Release, Key: l.Name, Owner: l.Owner, Token: l.Token})
		return err
	}
	w.holding = nil
	return nil
}

// fencedWrite writes the resource with the held token. A refusal means a
// newer token exists: the lease is lost.
func (w *worker) fencedWrite() error {
	accepted, err := w.res.write(w.ctx, w.holding.Name, w.holding.Token, w.cfg.Client)
	if err != nil {
		return err
	}
	if !accepted {
		w.holding = nil
	}
	return nil
}

// call runs in on the engine and journals it: first as unknown, with its
// call time and now, then with the answer and the return time. ok is false
// when the engine failed with an error the model does not know (the call's
// outcome is unknown); err only when the journal cannot be written.
func (w *worker) call(in model.Input) (out model.Output, ok bool, err error) {
	w.seq++
	w.clock.tick()
	in.NowMillis = w.db.Now().UnixMilli()
	op := linearizability.Op{Client: w.cfg.Client, Seq: w.seq, Input: in, Unknown: true, Call: monotonicNanos()}
	if in.Kind == model.Lease {
		op.Durability = linearizability.Full // a grant commits with synchronous=FULL
	}
	if err := linearizability.Encode(w.journal, op); err != nil {
		return out, false, err
	}
	res := drive.Run(w.ctx, w.db, in)
	op.Return = monotonicNanos()
	if res.Err != nil {
		fmt.Fprintf(os.Stderr, "c%d #%d %s: %v\n", w.cfg.Client, w.seq, in, res.Err)
		if in.Kind == model.Flush {
			op.Return = 0 // its deltas stay buffered and may be written later
		}
		return out, false, linearizability.Encode(w.journal, op)
	}
	op.Unknown, op.Output = false, res.Out
	return res.Out, true, linearizability.Encode(w.journal, op)
}
