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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/internal/checks"
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
	// hang makes a worker wait this long, and its call then fails with
	// ErrBusy, which the check reports. It is the one option a worker on
	// the engine's defaults sets.
	workerBusyTimeout = 30 * time.Second
	// progressEvery is how often a worker tells the driver how many calls
	// it has made.
	progressEvery = 20 * time.Millisecond
)

// workerConfig is what the driver tells one worker process.
type workerConfig struct {
	Path   string `json:"path"`   // the state file, or a redis:// URL when Remote
	Remote bool   `json:"remote"` // Path is a URL: the worker runs on a Redis server
	// WallClock says the Redis server runs on this machine: its TIME is
	// this machine's wall clock, the best estimate of the time a call
	// whose answer is lost ran at.
	WallClock bool   `json:"wall_clock"`
	Resource  string `json:"resource"` // the fenced resource
	Journal   string `json:"journal"`  // this worker's journal of ops
	Notes     string `json:"notes"`    // this worker's notes (notes.go)
	// Clients Client .. Client+Goroutines-1 are the worker's goroutines;
	// Client+Goroutines records its handle's flushes and, on the real
	// clock, Client+Goroutines+1 its sweeps (a reader leaves those two
	// unused). All are unique over the run, restarts included.
	Client     int    `json:"client"`
	Goroutines int    `json:"goroutines"`
	StepClock  bool   `json:"step_clock"`
	Seed       uint64 `json:"seed"`
	Bugs       string `json:"bugs"` // bugs.Set.String()
	// StartNanos (CLOCK_MONOTONIC) and EpochNanos place every call in its
	// epoch, the same for every worker.
	StartNanos int64 `json:"start"`
	EpochNanos int64 `json:"epoch"`
	// ReadOnly makes the worker a reader, as statectl is: it opens the
	// file with state.WithReadOnly and state.WithoutBackground, and not the
	// fenced resource, and its clients only read (caller.read). It records
	// no flush and no sweep: it makes none.
	ReadOnly bool `json:"read_only"`
}

// flushClient is the client id of a worker's flushes.
func (c workerConfig) flushClient() int { return c.Client + c.Goroutines }

// sweepClient is the client id of a worker's sweeps, its last client.
func (c workerConfig) sweepClient() int { return c.Client + c.Goroutines + 1 }

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

// worker is one worker process's state, shared by its goroutines.
type worker struct {
	cfg     workerConfig
	ctx     context.Context
	db      *state.DB
	clock   *stepClock // nil on the real clock
	res     *resource  // nil for a reader
	journal *journal
	// handle names the file engine's handle in the history (the
	// monotonic clock at its open, unique among the run's workers),
	// linearizability.Op.Handle; 0 on a remote store.
	handle int
	// calls counts the calls journalled into the history, for the
	// driver's progress: the driver stops on it, and the check counts the
	// history, so a call that may be left out of it (cut before it ran,
	// refused by the server, a flush) is not counted.
	calls atomic.Int64
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
	if cfg.Goroutines < 1 || (cfg.StepClock && cfg.Goroutines != 1) {
		return fmt.Errorf("config: %d goroutines", cfg.Goroutines)
	}
	if cfg.ReadOnly && (cfg.Remote || cfg.StepClock) {
		return errors.New("config: a reader opens a file on the real clock")
	}
	w := &worker{cfg: cfg, ctx: context.Background()}
	if w.journal, err = openJournal(cfg.Journal, cfg.Notes); err != nil {
		return err
	}
	defer w.journal.close()
	engine := hooks.Engine{Bugs: planted, Flushes: &flushRecorder{w: w}}
	opts := []state.Option{state.WithBusyTimeout(workerBusyTimeout)}
	var stop atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		stop.Store(true)
	}()
	if cfg.Remote {
		// Redis expires keys itself: there is no sweep to record.
		opts = []state.Option{hooks.Option(engine).(state.Option)}
		if w.db, err = openRemote(cfg.Path, opts, &stop); err != nil {
			return err
		}
		if w.db == nil {
			return nil // told to stop before the server came back
		}
	} else if cfg.ReadOnly {
		// As statectl opens the file. It flushes and sweeps nothing, so
		// there is nothing to observe; planted bugs reach its reads. It
		// keeps this one handle to the end: checks.ClockOffset holds a
		// process to one engine time offset.
		engine = hooks.Engine{Bugs: planted}
		opts = append(opts, state.WithReadOnly(), state.WithoutBackground())
	} else if cfg.StepClock {
		// Workers sweep only as a recorded verb.
		w.clock = newStepClock()
		opts = append(opts, state.WithClock(w.clock), state.WithoutBackground())
	} else {
		engine.Sweeps = &sweepRecorder{w: w}
	}
	if !cfg.Remote {
		opts = append(opts, hooks.Option(engine).(state.Option))
		if w.db, err = state.Open(cfg.Path, opts...); err != nil {
			return err
		}
		w.handle = int(monotonicNanos()) // one handle per worker process, never 0
	}
	if !cfg.ReadOnly {
		if w.res, err = openResource(cfg.Resource); err != nil {
			return errors.Join(err, w.db.Close())
		}
	}

	var wg sync.WaitGroup
	errs := make([]error, cfg.Goroutines)
	for i := range cfg.Goroutines {
		c := &caller{w: w, client: cfg.Client + i,
			load: workload{rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Client+i))), stepClock: cfg.StepClock}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			move := c.step
			if cfg.ReadOnly {
				move = c.read
			}
			for !stop.Load() {
				if err := move(); err != nil {
					errs[i] = fmt.Errorf("c%d: %w", c.client, err)
					stop.Store(true)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go w.progress(stdout, done)
	wg.Wait()
	close(done)
	var resErr error
	if w.res != nil {
		resErr = w.res.close()
	}
	return errors.Join(errors.Join(errs...), withoutFlushErrors(ownFlushError(w.db.Close())), resErr)
}

// remoteOpenWait bounds how long a worker on Redis keeps trying to open
// the URL while the server is down (the driver restarts it at once).
const remoteOpenWait = time.Minute

// openRemote opens url, again and again while the server is unavailable
// (a worker restarted while the driver restarts the server), until it
// opens, remoteOpenWait passes, or stop is set (then it returns nil, nil).
func openRemote(url string, opts []state.Option, stop *atomic.Bool) (*state.DB, error) {
	deadline := time.Now().Add(remoteOpenWait)
	for {
		db, err := state.Open(url, opts...)
		switch {
		case err == nil:
			return db, nil
		case !errors.Is(err, state.ErrUnavailable) || time.Now().After(deadline):
			return nil, err
		case stop.Load():
			return nil, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// withoutFlushErrors drops the *state.FlushError that Close returns when
// its flush dropped a key's delta (a bytes value): the flush recorder has
// recorded that answer, for the check.
func withoutFlushErrors(err error) error {
	var fe *state.FlushError
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var rest []error
		for _, e := range j.Unwrap() {
			if !errors.As(e, &fe) {
				rest = append(rest, e)
			}
		}
		return errors.Join(rest...)
	}
	if errors.As(err, &fe) {
		return nil
	}
	return err
}

// ownFlushError drops from what Flush or Close returned the errors of
// earlier background flushes (state.ErrBackgroundFlush): the flush
// recorder journalled those flushes, and their outcomes, when they ran.
// What is left is the call's own. A background flush's error wraps the
// mark and its own cause side by side: that cause is the background
// flush's, not the call's.
func ownFlushError(err error) error {
	_, own := checks.SplitFlushError(err)
	return own
}

// progress prints the calls made, one number a line, whenever it changed,
// until done.
func (w *worker) progress(stdout io.Writer, done <-chan struct{}) {
	out := bufio.NewWriter(stdout)
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	var reported int64
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		if n := w.calls.Load(); n != reported {
			reported = n
			fmt.Fprintln(out, n)
			if out.Flush() != nil {
				return // the driver is gone
			}
		}
	}
}

// caller is one goroutine of a worker: a client of its own, with its own
// lease owner, workload and call numbers.
type caller struct {
	w       *worker
	client  int
	load    workload
	seq     int64
	holding *state.Lease // the lease this client holds, as far as it knows
}

// toEpoch points the workload at the keys of the current epoch.
func (c *caller) toEpoch() {
	c.load.prefix = epochPrefix((monotonicNanos() - c.w.cfg.StartNanos) / max(c.w.cfg.EpochNanos, 1))
}

// step makes one move: a lease holder's, a counter's, buffered increments,
// an expiry probe, a transfer or an audit, a call on the key group, or a
// key verb, on the keys of the current epoch.
func (c *caller) step() error {
	c.toEpoch()
	switch r := c.load.rng.IntN(100); {
	case r < 35:
		return c.leaseStep()
	case r < 50:
		_, _, err := c.call(c.load.counter())
		return err
	case r < 56:
		return c.buffer()
	case r < 58:
		return c.probe()
	case r < 66:
		_, _, err := c.call(c.load.transfer())
		return err
	case r < 72:
		_, _, err := c.call(c.load.group())
		return err
	default:
		_, _, err := c.call(c.load.plain(false))
		return err
	}
}

// readPauseMax bounds the pause a reader's client takes after each read
// (drawn from its workload's source). Unpaced, one reader made more than
// three times the calls of four writing workers together (a read waits for
// no commit), crowding them out of the history and bringing a 60 s
// statestress run to its bound on calls about halfway; paced, it makes no
// more than a writing worker, and its clients keep a read in flight much
// of the time.
const readPauseMax = 2 * time.Millisecond

// read is a reader's one move: a Get, TTL or listing of the current
// epoch's keys, journalled as every call is, then a pause.
func (c *caller) read() error {
	c.toEpoch()
	if _, _, err := c.call(c.load.read()); err != nil {
		return err
	}
	time.Sleep(time.Duration(c.load.rng.Int64N(int64(readPauseMax))))
	return nil
}

// Expiry probes.
const (
	// probeTTLMillis is the TTL a probe writes its key with.
	probeTTLMillis = 1
	// probeWait is how long a probe waits before it reads its key back:
	// longer than the TTL, so the key has certainly expired by then, on
	// the real clock as on the stepped one (which moves at the next call).
	probeWait = 3 * time.Millisecond
)

// probe writes the client's own key with a TTL of a millisecond, waits
// longer than that, reads it back, and deletes it beside another key of
// its hash tag, which nothing writes: an expired key, for certain, which
// only a sweep may have deleted meanwhile. Every probe gives the check a
// read of an expired key and a Del of two keys that must count none,
// whatever the machine's speed; the tag makes the two keys one partition,
// so that count is checked (on keys checked one at a time, a count of one
// of two is not).
func (c *caller) probe() error {
	key := c.load.prefix + fmt.Sprintf("{x%d}p", c.client)
	other := c.load.prefix + fmt.Sprintf("{x%d}q", c.client)
	if _, _, err := c.call(model.Input{Kind: model.Set, Key: key, Value: c.load.value(), TTLMillis: probeTTLMillis}); err != nil {
		return err
	}
	time.Sleep(probeWait)
	if _, _, err := c.call(model.Input{Kind: model.Get, Key: key}); err != nil {
		return err
	}
	_, _, err := c.call(model.Input{Kind: model.Del, Keys: []string{key, other}})
	return err
}

// owner is this client's lease owner name: one per goroutine of one
// process, so a restarted worker's clients are new owners and wait for
// their predecessors' leases to expire.
func (c *caller) owner() string { return fmt.Sprintf("w%d", c.client) }

// leaseStep asks for a lease when it holds none (alone, or now and then
// inside an Update), and otherwise writes the fenced resource, renews,
// asks again (an extension), releases, or walks away and lets the lease
// expire.
func (c *caller) leaseStep() error {
	if c.holding == nil {
		name := c.load.pick(leaseNames)
		ask := model.Input{Kind: model.Lease, Key: name, Owner: c.owner(), TTLMillis: c.load.leaseTTL()}
		var token int64
		if c.load.rng.IntN(4) == 0 {
			in := model.Input{Kind: model.Update, Ops: []model.Input{ask, {Kind: model.Get, Key: c.load.pick(plainKeys)}}}
			out, ok, err := c.call(in)
			if err != nil || !ok || out.Err != model.ErrNone || len(out.Sub) == 0 {
				return err
			}
			token = out.Sub[0].Token
		} else {
			out, ok, err := c.call(ask)
			if err != nil || !ok || out.Err != model.ErrNone {
				return err
			}
			token = out.Token
		}
		c.holding = &state.Lease{Name: name, Owner: c.owner(), Token: token}
		return c.fencedWrite()
	}
	l := c.holding
	switch r := c.load.rng.IntN(100); {
	case r < 45:
		return c.fencedWrite()
	case r < 65:
		out, ok, err := c.call(model.Input{Kind: model.Renew, Key: l.Name, Owner: l.Owner, Token: l.Token, TTLMillis: c.load.leaseTTL()})
		if ok && out.Err == model.ErrLeaseLost {
			c.holding = nil
		}
		return err
	case r < 70:
		out, ok, err := c.call(model.Input{Kind: model.Lease, Key: l.Name, Owner: l.Owner, TTLMillis: c.load.leaseTTL()})
		if ok && out.Err == model.ErrNone {
			c.holding.Token = out.Token
		}
		return err
	case r < 95:
		c.holding = nil
		_, _, err := c.call(model.Input{Kind: model.Release, Key: l.Name, Owner: l.Owner, Token: l.Token})
		return err
	}
	c.holding = nil
	return nil
}

// fencedWrite writes the resource with the held token. A refusal means a
// newer token exists: the lease is lost.
func (c *caller) fencedWrite() error {
	accepted, err := c.w.res.write(c.w.ctx, c.holding.Name, c.holding.Token, c.owner())
	if err != nil {
		return err
	}
	if !accepted {
		c.holding = nil
	}
	return nil
}

// buffer adds buffered increments, each noted before it is made, and now
// and then flushes them (always with the stepped clock, which has no
// background flusher). The handle's flushes, whoever makes them, are
// recorded by flushRecorder.
func (c *caller) buffer() error {
	for _, inc := range c.load.buffered() {
		if err := c.w.journal.note(note{Kind: noteBuffered, Client: c.client, Key: inc.key, Delta: inc.delta}); err != nil {
			return err
		}
		if err := c.w.db.IncrBuffered(inc.key, inc.delta); err != nil {
			return c.w.failed(c.client, 0, fmt.Sprintf("incrbuffered(%q, %+d)", inc.key, inc.delta), err)
		}
	}
	if !c.w.cfg.StepClock && c.load.rng.IntN(3) != 0 {
		return nil
	}
	if c.w.clock != nil {
		c.w.clock.tick()
	}
	var fe *state.FlushError
	call := monotonicNanos()
	err := ownFlushError(c.w.db.Flush(c.w.ctx))
	switch {
	case err == nil, errors.As(err, &fe):
		return nil
	case c.w.cfg.Remote && (checks.NotApplied(err) || checks.OutcomeUnknown(err)):
		// The flush recorder journalled the flush itself (or left it
		// out, when its deltas went back into the buffer).
		return c.w.outage(c.client, 0, call, monotonicNanos(), "flush", err)
	}
	return c.w.failed(c.client, 0, "flush", err)
}

// failed notes an error the model has no answer for, which the check
// reports, and tells stderr. It returns an error only when the note cannot
// be written.
func (w *worker) failed(client int, seq int64, what string, err error) error {
	fmt.Fprintf(os.Stderr, "c%d #%d %s: %v\n", client, seq, what, err)
	return w.journal.note(note{Kind: noteError, Client: client, Seq: seq, Op: what, Err: err.Error()})
}

// claim is the engine time a call ran at, as the engine reports it.
type claim struct {
	mu      sync.Mutex
	claimed bool
	err     error // of journalling the op once its time was claimed
}

// call runs in on the engine and journals it. The engine reports the time
// it runs the call at (hooks.WithNow) as it claims it, before it runs the
// call, and the op is journalled then, with its call time, as unknown: a
// call killed after that point may have taken effect. A call that never
// got a time never ran and is not journalled. The answer is journalled when the call returns. ok is
// false when the engine failed with an error the model has no kind for:
// the call's outcome is unknown, and the error is noted for the check to
// report. err is set only when the journal cannot be written.
func (c *caller) call(in model.Input) (out model.Output, ok bool, err error) {
	if c.w.cfg.Remote {
		return c.callRemote(in)
	}
	c.seq++
	if c.w.clock != nil {
		c.w.clock.tick()
	}
	op := linearizability.Op{Client: c.client, Seq: c.seq, Input: in, Unknown: true, Call: monotonicNanos()}
	if grants(in) {
		op.Durability = linearizability.Full // a grant is synced before it is answered
	}
	var cl claim
	ctx := hooks.WithNow(c.w.ctx, func(now int64) {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		if cl.claimed {
			return // a Sweep claims a time per batch and deletes what expired by its first
		}
		cl.claimed = true
		op.Input.NowMillis = now
		c.w.claimedAt(&op)
		if cl.err = c.w.journal.op(op); cl.err == nil {
			c.w.calls.Add(1)
		}
	})
	res := drive.Run(ctx, c.w.db, in)
	ret := monotonicNanos()
	cl.mu.Lock()
	claimed, jerr := cl.claimed, cl.err
	cl.mu.Unlock()
	if jerr != nil {
		return out, false, jerr
	}
	if res.Err != nil {
		if !claimed {
			return out, false, c.w.failed(c.client, c.seq, in.String(), res.Err)
		}
		op.Return = ret
		return out, false, errors.Join(c.w.failed(c.client, c.seq, in.String(), res.Err), c.w.journal.op(op))
	}
	op.Unknown, op.Output, op.Return = false, res.Out, ret
	return res.Out, true, c.w.journal.op(op)
}

// claimedAt records on op, whose engine time the handle claimed just now
// under its lock, the handle and the moment (linearizability.Op.Claimed),
// when the call runs in one hold of the lock: not a listing or a Sweep,
// which take it a page or a batch at a time.
func (w *worker) claimedAt(op *linearizability.Op) {
	switch op.Input.Kind {
	case model.Scan, model.Leases, model.Sweep:
		return
	}
	if w.handle != 0 {
		op.Handle, op.Claimed = w.handle, monotonicNanos()
	}
}

// callRemote is call on a Redis server, which tells the time a verb ran
// at only with its answer: each script returns the server's TIME it used
// (an Update, the TIME its last attempt read), and the store reports it
// through hooks.NoteNow as the answer arrives. So the op is journalled as
// unknown before the call, at the store's estimate of the server's time,
// and again with the answer and the time the script used. A call the
// server refused (checks.NotApplied) is noted as refused, and the driver
// leaves it out of the history; one whose reply was lost
// (checks.OutcomeUnknown) stays unknown, noted as such. The driver holds
// both against the times the server was down.
func (c *caller) callRemote(in model.Input) (out model.Output, ok bool, err error) {
	c.seq++
	op := linearizability.Op{Client: c.client, Seq: c.seq, Input: in, Unknown: true, Call: monotonicNanos()}
	if grants(in) {
		op.Durability = linearizability.Full // the tail counts grants by it
	}
	op.Input.NowMillis = c.w.estimateNow()
	if err := c.w.journal.op(op); err != nil {
		return out, false, err
	}
	var mu sync.Mutex
	var now int64
	ctx := hooks.WithNow(c.w.ctx, func(ms int64) {
		mu.Lock()
		defer mu.Unlock()
		if now == 0 {
			now = ms
		}
	})
	res := drive.Run(ctx, c.w.db, in)
	ret := monotonicNanos()
	mu.Lock()
	claimed := now
	mu.Unlock()
	if res.Err == nil || !checks.NotApplied(res.Err) {
		c.w.calls.Add(1) // in the history: answered, or of unknown outcome
	}
	switch {
	case res.Err != nil && (checks.NotApplied(res.Err) || checks.OutcomeUnknown(res.Err)):
		return out, false, c.w.outage(op.Client, op.Seq, op.Call, ret, in.String(), res.Err)
	case res.Err != nil:
		return out, false, c.w.failed(c.client, c.seq, in.String(), res.Err)
	case claimed == 0:
		// Without the time, the answer cannot be checked: the op stays
		// unknown, and the report says why.
		return out, false, c.w.failed(c.client, c.seq, in.String(),
			errors.New("the store answered without reporting the server time its script used (hooks.NoteNow)"))
	}
	op.Input.NowMillis = claimed
	op.Unknown, op.Output, op.Return = false, res.Out, ret
	return res.Out, true, c.w.journal.op(op)
}

// estimateNow is the engine time a call starting now will run at, at the
// earliest, for the op journalled before the engine says: the wall clock
// for a Redis server on this machine (its TIME reads the same clock), else
// the store's own estimate (a file engine's is exact: it claims its time
// from that clock; a remote store's lags the server by a reply's latency).
func (w *worker) estimateNow() int64 {
	if w.cfg.WallClock {
		return time.Now().UnixMilli()
	}
	return w.db.Now().UnixMilli()
}

// outage notes a call (or flush) of client that failed because the server
// could not be reached or the reply was lost: refused (not applied, left
// out of the history) or uncertain (kept as an unknown outcome). The
// driver reports it unless the server was down during [call, ret].
func (w *worker) outage(client int, seq, call, ret int64, what string, err error) error {
	kind := noteUncertain
	if checks.NotApplied(err) {
		kind = noteRefused
	}
	return w.journal.note(note{Kind: kind, Client: client, Seq: seq, Op: what, Err: err.Error(), Call: call, Return: ret})
}

// grants reports whether in may grant a lease.
func grants(in model.Input) bool {
	if in.Kind == model.Lease {
		return true
	}
	for _, sub := range in.Ops {
		if sub.Kind == model.Lease {
			return true
		}
	}
	return false
}

// flushRecorder records every flush of the worker's handle (hooks.Engine
// Flushes) as a Flush op of the worker's flush client: the background
// flusher's, a caller's Flush, and Close's. It journals the op as unknown
// with the deltas the flush took before the flush writes them, and again
// with its outcome after: written, some keys dropped (per-key errors) or
// kept for the next flush (left out of the op), or nothing written and
// the deltas back in the buffer (an op with no increments, which the check
// leaves out).
type flushRecorder struct {
	w   *worker
	seq atomic.Int64
}

var _ hooks.FlushObserver = (*flushRecorder)(nil)

// Flushing journals the flush of deltas about to be written.
func (f *flushRecorder) Flushing(deltas map[string]int64) (claimed func(int64), done func(nowMillis int64, err error, restored bool)) {
	w := f.w
	op := linearizability.Op{Client: w.cfg.flushClient(), Seq: f.seq.Add(1), Unknown: true, Call: monotonicNanos(),
		Input: model.Input{Kind: model.Flush, Ops: flushOps(deltas)}}
	// The engine time the flush will claim is not known yet: it is
	// journalled at the engine's time at the call, and again as the flush
	// claims its own, so that a flush a kill cuts after that is judged at
	// the time it ran (which is later by what it waited for the lock: a
	// key live at its call may have expired).
	op.Input.NowMillis = w.estimateNow()
	jerr := w.journal.op(op)
	claimed = func(nowMillis int64) {
		op.Input.NowMillis = nowMillis
		w.claimedAt(&op)
		jerr = errors.Join(jerr, w.journal.op(op))
	}
	return claimed, func(nowMillis int64, err error, restored bool) {
		op.Return = monotonicNanos()
		what := op.Input.String() // before a restored flush drops its increments
		if nowMillis != 0 {
			op.Input.NowMillis = nowMillis
		}
		var fe *state.FlushError
		switch {
		case restored:
			op.Unknown, op.Input.Ops = false, nil
		case err == nil:
			op.Unknown, op.Output = false, model.Output{Sub: make([]model.Output, len(op.Input.Ops))}
		case errors.As(err, &fe):
			// A Redis cluster's flush may keep some keys' deltas for
			// the next flush (fe.Kept): this one did not apply them.
			op.Input.Ops = slices.DeleteFunc(op.Input.Ops, func(sub model.Input) bool { _, kept := fe.Kept[sub.Key]; return kept })
			op.Unknown, op.Output = false, model.Output{Sub: make([]model.Output, len(op.Input.Ops))}
			for i, sub := range op.Input.Ops {
				if kerr, ok := fe.Dropped[sub.Key]; ok {
					kind, known := checks.ErrKind(kerr)
					if !known {
						op.Unknown = true
						jerr = errors.Join(jerr, w.failed(op.Client, op.Seq, "flush of "+sub.Key, kerr))
					}
					op.Output.Sub[i].Err = kind
				}
			}
			if op.Unknown {
				op.Output = model.Output{}
			}
		}
		switch {
		case err == nil || fe != nil:
		case restored && checks.OutcomeUnknown(err):
			jerr = errors.Join(jerr, w.failed(op.Client, op.Seq, what,
				fmt.Errorf("a flush whose outcome is unknown put its deltas back into the buffer, so the next flush may apply them twice: %w", err)))
		case w.cfg.Remote && (checks.NotApplied(err) || checks.OutcomeUnknown(err)):
			// Refused, the deltas went back (restored) and the op is
			// left out; or lost, and the op stays unknown.
			jerr = errors.Join(jerr, w.outage(op.Client, op.Seq, op.Call, op.Return, what, err))
		default:
			jerr = errors.Join(jerr, w.failed(op.Client, op.Seq, what, err))
		}
		if jerr = errors.Join(jerr, w.journal.op(op)); jerr != nil {
			fmt.Fprintln(os.Stderr, "stress worker: journal a flush:", jerr)
			os.Exit(1) // the engine's goroutine cannot return it
		}
	}
}

// flushOps returns deltas as the IncrBy ops of a Flush, in key order.
func flushOps(deltas map[string]int64) []model.Input {
	out := make([]model.Input, 0, len(deltas))
	for k, d := range deltas {
		out = append(out, model.Input{Kind: model.IncrBy, Key: k, Delta: d})
	}
	sortInputsByKey(out)
	return out
}

// sweepRecorder records every sweep statement of the worker's handle on
// the real clock (hooks.Engine Sweeps), the background sweeper's and the
// inline ones alike, as an op of the worker's sweep client. Before the
// statement it journals an unknown Sweep at the sweep's cutoff: a sweep a
// kill cut may have deleted any key expired then. After it, the keys it
// deleted, as a Del of them at the cutoff that found none live (a sweep
// that deleted a live key fails that), or, when it deleted none, an op with
// no keys, which the check leaves out.
type sweepRecorder struct {
	w   *worker
	seq atomic.Int64
}

var _ hooks.SweepObserver = (*sweepRecorder)(nil)

// Sweeping journals the sweep statement about to run.
func (s *sweepRecorder) Sweeping(cutoffMillis int64, _ bool) func(keys []string, err error) {
	w := s.w
	op := linearizability.Op{Client: w.cfg.sweepClient(), Seq: s.seq.Add(1), Unknown: true, Call: monotonicNanos(),
		Input: model.Input{Kind: model.Sweep, NowMillis: cutoffMillis}}
	jerr := w.journal.op(op)
	return func(keys []string, err error) {
		op.Return = monotonicNanos()
		if err != nil {
			jerr = errors.Join(jerr, w.failed(op.Client, op.Seq, op.Input.String(), err))
		} else {
			keys = slices.Clone(keys)
			slices.Sort(keys)
			op.Unknown = false
			op.Input = model.Input{Kind: model.Del, Keys: keys, NowMillis: cutoffMillis}
			op.Output = model.Output{N: 0}
		}
		if jerr = errors.Join(jerr, w.journal.op(op)); jerr != nil {
			fmt.Fprintln(os.Stderr, "stress worker: journal a sweep:", jerr)
			os.Exit(1) // the engine's goroutine cannot return it
		}
	}
}
