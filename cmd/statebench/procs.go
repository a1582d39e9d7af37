package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/statekit/statekit/internal/childproc"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state"
)

// childArg, as the first argument, makes statebench a worker process: of the
// multi-process scenarios (it opens the file, says "ready", waits for "go"
// on stdin, runs Incr on its key until its budget is spent, and writes a
// childResult as JSON on stdout), with -mode memory of the memory
// scenario, which wants a process of its own to measure, or with -mode app
// one server process of the app scenario (app_child.go).
const childArg = "-child"

// childResult is what a worker process reports.
type childResult struct {
	Ops       int64   `json:"ops"`
	ElapsedNs int64   `json:"elapsed_ns"`
	LatNs     []int64 `json:"lat_ns"`
}

// The ways a worker process may wait for another's write lock.
const (
	waitEngine = "engine" // the engine's busy schedule (state/busy.go)
	waitSQLite = "sqlite" // SQLite's default schedule, 1, 2, 5 ... 100 ms
	waitFlock  = "flock"  // a blocking flock(2) on a file beside the state file around each verb
	ownFiles   = "own"    // not a way to wait: each process on a file of its own, for the floor
)

// child is the worker process's main.
func child(args []string) error {
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	mode := fs.String("mode", "incr", "incr, lease (Lease+Release pairs), memory or app")
	path := fs.String("path", "", "database file; for memory, a directory; for app with -limiter lua, a redis-server's address")
	key := fs.String("key", "hot", "key to increment")
	benchtime := fs.String("benchtime", "1s", "budget")
	wait := fs.String("wait", waitEngine, "how to wait for another process's lock: engine, sqlite or flock")
	rate := fs.Float64("rate", 0, "calls a second, evenly spaced; 0: back to back")
	limiter := fs.String("limiter", limitIncr, "app: how the server limits: incr, middleware or lua")
	syncMode := fs.String("sync", "normal", "app: the file's sync mode: normal or full")
	cpuProfile := fs.String("cpuprofile", "", "app: write the server's CPU profile here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *mode {
	case "memory":
		return childMemory(*path)
	case "app":
		return childApp(appChild{limiter: *limiter, path: *path, sync: *syncMode, cpuProfile: *cpuProfile})
	}
	bt, err := parseBudget(*benchtime)
	if err != nil {
		return err
	}
	var opts []state.Option
	if *wait == waitSQLite {
		opts = append(opts, hooks.Option(hooks.Engine{SQLiteBusySchedule: true}).(state.Option))
	}
	db, err := state.Open(*path, opts...)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx := context.Background()
	op := func() error { _, err := db.Incr(ctx, *key); return err }
	if *mode == modeLease {
		op = leasePair(ctx, db, *key)
	}
	if *wait == waitFlock {
		lk, err := openFlock(*path + "-benchlock")
		if err != nil {
			return err
		}
		defer lk.Close()
		incr := op
		op = func() error {
			if err := lk.lock(); err != nil {
				return err
			}
			defer lk.unlock()
			return incr()
		}
	}
	in := bufio.NewReader(os.Stdin)
	fmt.Println("ready")
	if line, err := in.ReadString('\n'); err != nil || strings.TrimSpace(line) != "go" {
		return fmt.Errorf("waiting for go: %q %v", line, err)
	}
	var s sample
	if *rate > 0 {
		s, err = pacedLoop(bt, *rate, op)
	} else {
		s, err = loop(bt, op)
	}
	if err != nil {
		return err
	}
	r := childResult{Ops: s.ops, ElapsedNs: s.elapsed.Nanoseconds(), LatNs: make([]int64, len(s.lat))}
	for i, d := range s.lat {
		r.LatNs[i] = d.Nanoseconds()
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// pacedLoop is loop with the calls spaced evenly, rate a second from the
// first (a call late for its turn goes at once); it times the calls, not
// the pauses between them.
func pacedLoop(b budget, rate float64, op func() error) (sample, error) {
	every := time.Duration(float64(time.Second) / rate)
	var s sample
	done := b.until()
	start := time.Now()
	next := start
	for {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(every)
		t := time.Now()
		if err := op(); err != nil {
			return s, err
		}
		s.lat = append(s.lat, time.Since(t))
		s.ops++
		if done(s.ops) {
			break
		}
	}
	s.elapsed = time.Since(start)
	return s, nil
}

// worker is a running child process.
type worker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// procRun is how a multi-process side runs: how many processes, on which
// key (each its own, key:i, when distinct), waiting how.
type procRun struct {
	n        int
	key      string
	distinct bool
	wait     string
	ownFile  bool    // each process on a file of its own (path.i): no lock shared
	rate     float64 // calls a second per process; 0: back to back
	lease    bool    // each call a Lease and a Release of the key, not an Incr (procslease.go)
}

// file returns the file process i works on.
func (r procRun) file(path string, i int) string {
	if r.ownFile {
		return path + "." + strconv.Itoa(i)
	}
	return path
}

// startWorkers starts the children of r on path, each with budget b, and
// waits until each has opened the file.
func startWorkers(e *env, r procRun, path string, b budget) ([]*worker, error) {
	var ws []*worker
	for i := range r.n {
		key := r.key
		if r.distinct {
			key += ":" + strconv.Itoa(i)
		}
		cmd := exec.Command(e.exe, childArg, "-path", r.file(path, i), "-key", key, "-benchtime", b.String(), "-wait", r.wait,
			"-rate", strconv.FormatFloat(r.rate, 'f', -1, 64), "-mode", r.mode())
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return ws, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return ws, err
		}
		if err := childproc.Start(cmd); err != nil { // on Linux it dies with statebench
			return ws, fmt.Errorf("start worker: %w", err)
		}
		ws = append(ws, &worker{cmd: cmd, in: in, out: bufio.NewReader(out)})
	}
	for _, w := range ws {
		line, err := w.out.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ready" {
			return ws, fmt.Errorf("worker did not start: %q %v", line, err)
		}
	}
	return ws, nil
}

// stopWorkers ends every child still running.
func stopWorkers(ws []*worker) {
	for _, w := range ws {
		w.in.Close()
		_ = w.cmd.Wait()
	}
}

// processes runs the worker processes of r on the file at path at once,
// each with budget b, and returns their combined sample, timed from "go" to
// the last result, and each process's own.
func processes(e *env, r procRun, path string, b budget) (sample, []sample, error) {
	ws, err := startWorkers(e, r, path, b)
	defer stopWorkers(ws)
	if err != nil {
		return sample{}, nil, err
	}
	start := time.Now()
	for _, w := range ws {
		if _, err := io.WriteString(w.in, "go\n"); err != nil {
			return sample{}, nil, err
		}
	}
	var all sample
	each := make([]sample, len(ws))
	for i, w := range ws {
		var res childResult
		if err := json.NewDecoder(w.out).Decode(&res); err != nil {
			return all, nil, fmt.Errorf("worker result: %w", err)
		}
		each[i] = sample{ops: res.Ops, elapsed: time.Duration(res.ElapsedNs)}
		for _, ns := range res.LatNs {
			each[i].lat = append(each[i].lat, time.Duration(ns))
		}
		all.ops += res.Ops
		all.lat = append(all.lat, each[i].lat...)
	}
	all.elapsed = time.Since(start)
	return all, each, nil
}

// procSide is one side of a multi-process scenario over its rounds: the
// combined sample, each process's, and the increments it must find.
type procSide struct {
	r     procRun
	all   sample
	each  []sample
	want  int64 // increments acknowledged
	got   int64 // increments found in the file after each round
	round *int  // shared by every side: a fresh key each round
}

// run is the side as interleaveWith calls it.
func (p *procSide) run(e *env, path string) func(budget) (sample, error) {
	return func(b budget) (sample, error) {
		*p.round++
		r := p.r
		r.key = fmt.Sprintf("%s:%d", r.key, *p.round)
		s, each, err := processes(e, r, path, b)
		if err != nil {
			return s, err
		}
		if len(p.each) < len(each) {
			p.each = make([]sample, len(each))
		}
		for i := range each {
			p.each[i].merge(each[i])
		}
		p.want += s.ops
		if !r.distinct && !r.ownFile {
			v, err := r.count(e, path, r.key)
			p.got += v
			return s, err
		}
		for i := range r.n {
			k := r.key
			if r.distinct {
				k += ":" + strconv.Itoa(i)
			}
			v, err := r.count(e, r.file(path, i), k)
			if err != nil {
				return s, err
			}
			p.got += v
		}
		return s, nil
	}
}

// perProcess summarises each process's latencies: the worst p99 and max
// among them, and a line listing each.
func (p *procSide) perProcess() (worstP99, worstMax float64, line string) {
	var parts []string
	for i, s := range p.each {
		m := s.measure("")
		worstP99 = max(worstP99, m.P99Micros)
		worstMax = max(worstMax, m.MaxMicros)
		parts = append(parts, fmt.Sprintf("#%d %.0f/s p50 %s p99 %s max %s", i+1, m.OpsPerSec, num(m.P50Micros), num(m.P99Micros), num(m.MaxMicros)))
	}
	return worstP99, worstMax, strings.Join(parts, "; ")
}

// The multi-process targets, for 4 processes: back to back,
// at least procsMinRatio of one process's throughput; at a steady load,
// each process's p99 at most procsMaxP99x one process's serving the same
// load alone, and no call slower than maxCallMicros.
const (
	procsMinRatio = 0.9
	procsMaxP99x  = 2.0
	maxCallMicros = 20_000
	targetProcs   = 4
	// pacedTotal is the steady load, calls a second over all processes:
	// about a quarter of what one process does back to back here, so
	// that the processes meet on the lock now and then and the CPU is
	// not the bottleneck (as in a server answering requests).
	pacedTotal = 4000
)

// runProcesses runs Incr from several processes on one file (-procs: 2, 4
// and 8), each side beside one process in the same run: back to back, on
// one hot key and on a key each (throughput), and at a steady load of
// pacedTotal calls a second in all (latency). Then 4 processes on a hot key
// beside themselves waiting for the lock in other ways: SQLite's own busy
// schedule (the engine's before the short one), a kernel-queued lock (a
// blocking flock(2) on a file beside the state file, around each verb),
// and, for the floor the machine sets, each process on a file of its own.
// Then Lease+Release pairs from 4 processes, a lease name each, beside one
// process. Every count is checked exact.
func runProcesses(e *env) ([]Result, error) {
	path := e.path("procs.state")
	db, err := state.Open(path) // create the file before the race to open it
	if err != nil {
		return nil, err
	}
	db.Close()
	var out []Result
	var sides []*procSide
	round := 0 // every side of every pair counts fresh keys from here
	pair := func(a, b procRun) (*procSide, *procSide, error) {
		sa, sb := &procSide{r: a, round: &round}, &procSide{r: b, round: &round}
		sides = append(sides, sa, sb)
		ma, mb, err := interleaveWith(e, sa.run(e, path), sb.run(e, path), runOpts{warm: budget{n: 200}})
		sa.all, sb.all = ma, mb
		return sa, sb, err
	}
	// versus runs a against b and reports a's line, with each process's
	// latencies in the notes.
	versus := func(aName, bName string, a, b procRun) (Result, error) {
		e.logf("processes: %s beside %s", aName, bName)
		sa, sb, err := pair(a, b)
		if err != nil {
			return Result{}, err
		}
		r := ratioResult("processes", sa.all.measure(aName), sb.all.measure(bName), 0)
		r.Target = ""
		ap99, amx, aline := sa.perProcess()
		bp99, bmx, bline := sb.perProcess()
		r.Extra["worst_process_p99_us"], r.Extra["max_us"] = ap99, amx
		r.Extra["baseline_worst_process_p99_us"], r.Extra["baseline_max_us"] = bp99, bmx
		r.Extra["p99_vs_baseline"] = ap99 / bp99
		r.Notes = append(r.Notes,
			fmt.Sprintf("%s beside %s: %.2fx the throughput; worst process p99 %s µs against %s (%.2fx), max %s µs against %s",
				aName, bName, r.Ratio, num(ap99), num(bp99), ap99/bp99, num(amx), num(bmx)),
			fmt.Sprintf("  %s per process: %s", aName, aline),
			fmt.Sprintf("  %s per process: %s", bName, bline))
		return r, nil
	}
	w := e.wait
	for _, distinct := range []bool{false, true} {
		for _, n := range e.procs {
			what := "hot key"
			if distinct {
				what = "a key each"
			}
			r, err := versus(fmt.Sprintf("Incr x%d processes, %s", n, what), "Incr x1 process",
				procRun{n: n, key: "k", distinct: distinct, wait: w}, procRun{n: 1, key: "k", wait: w})
			if err != nil {
				return nil, err
			}
			if n == targetProcs {
				r.Target = fmt.Sprintf(">= %.1fx", procsMinRatio)
				r.Met = r.Ratio >= procsMinRatio
			}
			out = append(out, r)
		}
	}
	if slices.Contains(e.procs, targetProcs) {
		r, err := versus(fmt.Sprintf("Lease+Release x%d processes, a name each", targetProcs), "Lease+Release x1 process",
			procRun{n: targetProcs, key: "l", distinct: true, wait: w, lease: true}, procRun{n: 1, key: "l", distinct: true, wait: w, lease: true})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	for _, n := range e.procs {
		r, err := versus(fmt.Sprintf("Incr x%d processes at %d/s in all, hot key", n, pacedTotal), fmt.Sprintf("Incr x1 at %d/s", pacedTotal),
			procRun{n: n, key: "p", wait: w, rate: pacedTotal / float64(n)}, procRun{n: 1, key: "p", wait: w, rate: pacedTotal})
		if err != nil {
			return nil, err
		}
		r.Ratio, r.Unit = r.Extra["p99_vs_baseline"], "x p99"
		if n == targetProcs {
			r.Target = fmt.Sprintf("p99 <= %.0fx, max < %d ms", procsMaxP99x, maxCallMicros/1000)
			r.Met = r.Ratio <= procsMaxP99x && r.Extra["max_us"] < maxCallMicros
		}
		out = append(out, r)
	}
	if !slices.Contains(e.procs, targetProcs) {
		return finishProcesses(out, sides)
	}
	n := targetProcs
	for _, paced := range []bool{false, true} {
		for _, alt := range []string{waitSQLite, waitFlock, ownFiles} {
			a := procRun{n: n, key: "w", wait: waitEngine}
			b := procRun{n: n, key: "w", wait: alt}
			if alt == ownFiles {
				b = procRun{n: n, key: "w", wait: waitEngine, ownFile: true}
			}
			how := "back to back"
			if paced {
				a.rate, b.rate = pacedTotal/float64(n), pacedTotal/float64(n)
				how = fmt.Sprintf("at %d/s in all", pacedTotal)
			}
			r, err := versus(fmt.Sprintf("x%d %s, engine schedule", n, how), fmt.Sprintf("x%d, %s", n, waitName(alt)), a, b)
			if err != nil {
				return nil, err
			}
			if paced {
				r.Ratio, r.Unit = r.Extra["p99_vs_baseline"], "x p99"
			}
			out = append(out, r)
		}
	}
	return finishProcesses(out, sides)
}

// finishProcesses checks that every side's count is exact and says so.
func finishProcesses(out []Result, sides []*procSide) ([]Result, error) {
	var want int64
	for _, s := range sides {
		if s.want != s.got {
			return nil, fmt.Errorf("not exact: %d calls acknowledged, %d counted in the file (%d processes, %s, %s)", s.want, s.got, s.r.n, s.r.wait, s.r.mode())
		}
		want += s.want
	}
	if len(out) > 0 {
		out[0].Notes = append(out[0].Notes, fmt.Sprintf("exact: all %d calls acknowledged in the processes scenario are in the files (increments by their sums, Lease+Release pairs by their leases' tokens)", want))
	}
	return out, nil
}

// parseCounts reads a comma-separated list of positive counts.
func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive counts, comma separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// waitName describes a way to wait for the lock, for the report.
func waitName(w string) string {
	switch w {
	case waitSQLite:
		return "SQLite's schedule"
	case waitFlock:
		return "flock around each verb"
	case ownFiles:
		return "a file each (no shared lock)"
	}
	return "engine schedule"
}

// readInt reads an integer key from the file at path.
func readInt(e *env, path, key string) (int64, error) {
	db, err := state.Open(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	v, err := db.Get(e.ctx, key)
	if err != nil {
		return 0, err
	}
	n, ok := v.Int()
	if !ok {
		return 0, fmt.Errorf("%s is not an integer", key)
	}
	return n, nil
}
