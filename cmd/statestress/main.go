// Command statestress attacks statekit's real path: several worker
// processes share one state file on disk and run every verb while the
// driver kills random workers with SIGKILL and restarts them; then it checks
// the whole history for linearizability, the fencing tokens, the counters
// and the file's integrity. It prints what it did and the verdict, and
// exits 1 on any violation.
//
//	statestress                                  # 4 processes, 10s, a kill every 250ms
//	statestress -procs 8 -duration 2m -kill-every 100ms
//	for s in 1 2 3 4 5; do statestress -seed $s -duration 60s || break; done   # longer: several runs
//	statestress -bug lease-two-statements        # must FAIL: duplicate fencing tokens
//	statestress -dir /var/tmp/run -keep          # keep the files to look at
//
// The files go to a new directory under -dir (the system's temporary
// directory by default), removed after a run that passed unless -keep.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/stress"
)

// defaultOps bounds a run's history: the check holds all of it in memory
// (the driver peaks near 2.5 KB a call, porcupine's search included), so a
// longer attack is better run as several runs, each with its own seed.
const defaultOps = 1_000_000

func main() {
	stress.WorkerMain()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, runs the stress test and returns the exit code: 0 for a
// pass, 1 for a violation, 2 when it could not run.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("statestress", flag.ContinueOnError)
	fs.SetOutput(stderr)
	procs := fs.Int("procs", stress.DefaultProcesses, "worker processes at once")
	duration := fs.Duration("duration", stress.DefaultDuration, "how long to attack")
	ops := fs.Int("ops", defaultOps, "stop after this many calls (0: only -duration)")
	killEvery := fs.Duration("kill-every", stress.DefaultKillEvery, "mean time between two SIGKILLs (0 or less: none)")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the workload and kill schedule")
	bug := fs.String("bug", "", "plant a bug in every worker ("+fmt.Sprint(bugs.Names())+")")
	checkTimeout := fs.Duration("check-timeout", stress.DefaultCheckTimeout, "porcupine's time limit per partition")
	epoch := fs.Duration("epoch", stress.DefaultEpochEvery, "how long the workers use one set of keys (bounds the check's time and memory)")
	dir := fs.String("dir", "", "where to make the run's directory (default: the temporary directory)")
	keep := fs.Bool("keep", false, "keep the run's files even when it passes")
	verbose := fs.Bool("v", false, "print each kill")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "statestress: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *procs < 1 || *procs > stress.MaxProcesses || *duration <= 0 || *ops < 0 || *epoch <= 0 {
		fmt.Fprintf(stderr, "statestress: want 1 to %d -procs, a positive -duration and -epoch, and -ops of 0 or more\n", stress.MaxProcesses)
		return 2
	}
	cfg := stress.Config{Processes: *procs, Duration: *duration, MaxOps: *ops, KillEvery: *killEvery,
		Seed: *seed, CheckTimeout: *checkTimeout, EpochEvery: *epoch}
	if *killEvery <= 0 {
		cfg.KillEvery = -1
	}
	if *bug != "" {
		b, err := bugs.Parse(*bug)
		if err != nil {
			fmt.Fprintln(stderr, "statestress:", err)
			return 2
		}
		cfg.Bugs = cfg.Bugs.With(b)
	}
	if *verbose {
		cfg.Log = stderr
	}
	runDir, err := os.MkdirTemp(*dir, "statestress-")
	if err != nil {
		fmt.Fprintln(stderr, "statestress:", err)
		return 2
	}
	cfg.Dir = runDir

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stderr, "statestress: %d processes for %v, a kill every %v on average, in %s\n",
		cfg.Processes, cfg.Duration, *killEvery, runDir)
	rep, err := stress.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "statestress:", err)
		return 2
	}
	if _, err := rep.WriteTo(stdout); err != nil {
		return 2
	}
	if !rep.OK() {
		return 1
	}
	if !*keep {
		os.RemoveAll(runDir)
	}
	return 0
}
