package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/statekit/statekit/internal/childproc"
)

// Parallel runs use worker processes, not goroutines: SQLite's random
// generator, which makes a run's bytes reproducible, is process-wide, so two
// runs must never share a process. A worker is this binary with -worker: it
// reads seeds from stdin, one a line, and answers each with a JSON result
// line on stdout.

// serveWorker runs the seeds read from in and writes one result per line
// to out, until in ends.
func serveWorker(opt options, in io.Reader, out io.Writer) int {
	// Ctrl-C, or a SIGTERM to the process group, reaches the workers too:
	// the parent decides (it stops them), so a worker's death is not taken
	// for a failure of its seed.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	sc := bufio.NewScanner(in)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		seed, err := strconv.ParseUint(strings.TrimSpace(sc.Text()), 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "statesim worker:", err)
			return exitUsage
		}
		cfg := opt.cfg
		cfg.Seed = seed
		if err := enc.Encode(runSeed(cfg, opt.htmlDir)); err != nil {
			fmt.Fprintln(os.Stderr, "statesim worker:", err)
			return exitUsage
		}
	}
	return exitOK
}

// worker is a running worker process.
type worker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// startWorker starts a worker process with opt's simulation flags.
func startWorker(opt options) (*worker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	args := append([]string{"-worker", "-html", opt.htmlDir}, opt.cfg.Args()...)
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	// On Linux a worker dies with statesim, even a statesim killed with
	// SIGKILL: its input ends then, but it would see that only after its
	// seed, which may take minutes.
	if err := childproc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	return &worker{cmd: cmd, in: in, out: sc}, nil
}

// run sends one seed and waits for its result.
func (w *worker) run(seed uint64) (result, error) {
	if _, err := fmt.Fprintln(w.in, seed); err != nil {
		// The worker is gone before it took the seed (a broken pipe):
		// as for one that ends without its result, say so by the seed.
		return result{}, fmt.Errorf("worker: seed %d: %w (sending it: %v)", seed, io.ErrUnexpectedEOF, err)
	}
	if !w.out.Scan() {
		err := w.out.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return result{}, fmt.Errorf("worker: seed %d: %w", seed, err)
	}
	var res result
	if err := json.Unmarshal(w.out.Bytes(), &res); err != nil {
		return result{}, fmt.Errorf("worker: seed %d: %w", seed, err)
	}
	return res, nil
}

// stop closes the worker's input and waits for it to exit.
func (w *worker) stop() error {
	w.in.Close()
	return w.cmd.Wait()
}

// runParallel runs opt.seeds seeds from opt.from on opt.parallel workers,
// calling done with each result as it arrives (from one goroutine at a
// time), until the seeds run out, done returns false or stop closes; on
// stop it kills the workers at once. It returns how many seeds it handed
// out (the first ones from opt.from), those of them that gave no result,
// sorted, and the first worker failure (none after stop).
func runParallel(opt options, stop <-chan struct{}, done func(result) bool) (int, []uint64, error) {
	next := make(chan uint64)
	quit := make(chan struct{}) // closed when no more seeds should be sent
	var once sync.Once
	halt := func() { once.Do(func() { close(quit) }) }
	var mu sync.Mutex
	var firstErr error
	var lost []uint64
	fail := func(seed *uint64, err error) { // seed: the one lost, if any
		mu.Lock()
		if seed != nil {
			lost = append(lost, *seed)
		}
		if firstErr == nil && !closed(stop) {
			firstErr = err
		}
		mu.Unlock()
		halt()
	}
	var wg sync.WaitGroup
	var workers []*worker
	for range opt.parallel {
		w, err := startWorker(opt)
		if err != nil {
			fail(nil, err)
			break
		}
		workers = append(workers, w)
		wg.Go(func() {
			defer w.stop()
			for seed := range next {
				res, err := w.run(seed)
				if err != nil {
					fail(&seed, err)
					return
				}
				mu.Lock()
				more := done(res)
				mu.Unlock()
				if !more {
					halt()
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		halt() // every worker is gone: nobody takes seeds
		close(finished)
	}()
	go func() {
		select {
		case <-stop:
			halt()
			for _, w := range workers {
				w.cmd.Process.Kill()
			}
		case <-finished:
		}
	}()
	sent := 0
send:
	for i := range opt.seeds {
		select {
		case next <- opt.from + uint64(i):
			sent++
		case <-quit:
			break send
		}
	}
	close(next)
	<-finished
	slices.Sort(lost)
	return sent, lost, firstErr
}
