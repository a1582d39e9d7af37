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
	"strings"
	"time"

	"github.com/statekit/statekit/state"
)

// childArg, as the first argument, makes statebench a worker process: of the
// multi-process scenario (it opens the file, says "ready", waits for "go" on
// stdin, runs Incr on one key until its budget is spent, and writes a
// childResult as JSON on stdout), or with -mode memory of the memory
// scenario, which wants a process of its own to measure.
const childArg = "-child"

// childResult is what a worker process reports.
type childResult struct {
	Ops       int64   `json:"ops"`
	ElapsedNs int64   `json:"elapsed_ns"`
	LatNs     []int64 `json:"lat_ns"`
}

// child is the worker process's main.
func child(args []string) error {
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	mode := fs.String("mode", "incr", "incr, or memory")
	path := fs.String("path", "", "database file; for memory, a directory")
	key := fs.String("key", "hot", "key to increment")
	benchtime := fs.String("benchtime", "1s", "budget")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mode == "memory" {
		return childMemory(*path)
	}
	bt, err := parseBudget(*benchtime)
	if err != nil {
		return err
	}
	db, err := state.Open(*path)
	if err != nil {
		return err
	}
	defer db.Close()
	in := bufio.NewReader(os.Stdin)
	fmt.Println("ready")
	if line, err := in.ReadString('\n'); err != nil || strings.TrimSpace(line) != "go" {
		return fmt.Errorf("waiting for go: %q %v", line, err)
	}
	ctx := context.Background()
	s, err := loop(bt, func() error { _, err := db.Incr(ctx, *key); return err })
	if err != nil {
		return err
	}
	r := childResult{Ops: s.ops, ElapsedNs: s.elapsed.Nanoseconds(), LatNs: make([]int64, len(s.lat))}
	for i, d := range s.lat {
		r.LatNs[i] = d.Nanoseconds()
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// worker is a running child process.
type worker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startWorkers starts n children on path, each with budget b, and waits
// until each has opened the file.
func startWorkers(e *env, n int, path, key string, b budget) ([]*worker, error) {
	var ws []*worker
	for range n {
		cmd := exec.Command(e.exe, childArg, "-path", path, "-key", key, "-benchtime", b.String())
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return ws, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return ws, err
		}
		if err := cmd.Start(); err != nil {
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

// processes runs n worker processes on one key of the file at path at once,
// each with budget b, and returns their combined sample, timed from "go" to
// the last result.
func processes(e *env, n int, path, key string, b budget) (sample, error) {
	ws, err := startWorkers(e, n, path, key, b)
	defer stopWorkers(ws)
	if err != nil {
		return sample{}, err
	}
	start := time.Now()
	for _, w := range ws {
		if _, err := io.WriteString(w.in, "go\n"); err != nil {
			return sample{}, err
		}
	}
	var all sample
	for _, w := range ws {
		var r childResult
		if err := json.NewDecoder(w.out).Decode(&r); err != nil {
			return all, fmt.Errorf("worker result: %w", err)
		}
		all.ops += r.Ops
		for _, ns := range r.LatNs {
			all.lat = append(all.lat, time.Duration(ns))
		}
	}
	all.elapsed = time.Since(start)
	return all, nil
}

// runProcesses runs Incr on one key from several processes against one
// process, and checks that the count is exact.
func runProcesses(e *env) ([]Result, error) {
	path := e.path("procs.state")
	db, err := state.Open(path) // create the file before the race to open it
	if err != nil {
		return nil, err
	}
	db.Close()
	round := 0
	var want, got int64
	side := func(n int) func(budget) (sample, error) {
		return func(b budget) (sample, error) {
			round++
			key := fmt.Sprintf("hot:%d", round)
			s, err := processes(e, n, path, key, b)
			if err != nil {
				return s, err
			}
			v, err := readInt(e, path, key)
			want += s.ops
			got += v
			return s, err
		}
	}
	many, one, err := interleaveWith(e, side(e.procs), side(1), runOpts{warm: budget{n: 200}})
	if err != nil {
		return nil, err
	}
	r := ratioResult("processes", many.measure(fmt.Sprintf("Incr x%d processes", e.procs)), one.measure("Incr x1 process"), 0.8)
	if want != got {
		return nil, fmt.Errorf("not exact: %d increments acknowledged, %d in the file", want, got)
	}
	r.Notes = append(r.Notes, fmt.Sprintf("exact: %d increments acknowledged, %d in the file", want, got))
	return []Result{r}, nil
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
