// Command statesim runs statekit's deterministic simulator (package sim).
//
//	statesim -seed N [flags]                 run one seed
//	statesim -seeds K [-from S] [-parallel P] run K seeds from S
//	statesim -bug NAME -seeds 200            show that a planted bug is caught
//
// Every run ends with every check, whatever faults it injected. A failed
// check prints what broke, the operations that matter, the line that
// replays the run, and, when linearizability failed, writes porcupine's view
// of the failing partition to an HTML file it names. -shrink then looks for
// a smaller run that fails the same way. With -keep-going every other
// failing seed gets its own replay line.
//
// An interrupt (SIGINT, SIGTERM) stops -seeds: no seed more starts, the
// summary says which seeds ran and which did not, and a second interrupt
// ends statesim at once.
//
// Exit status: 0 when every check held, 1 on a violation, 2 on bad flags or
// when statesim could not finish: interrupted, a worker failed, or its report
// could not be written to stdout (the rest of it then goes to stderr).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/statekit/statekit/internal/cliout"
	"github.com/statekit/statekit/sim"
)

// Exit statuses.
const (
	exitOK        = 0
	exitViolation = 1
	exitUsage     = 2
)

// options are the flags beside the simulation's own.
type options struct {
	cfg       sim.Config
	seeds     int
	from      uint64
	parallel  int
	verbose   bool
	htmlDir   string
	shrink    bool
	keepGoing bool
	worker    bool
	shrinkMax int
}

func main() {
	// A closed pipe on stdout (statesim | head) is a write error the
	// report falls back to stderr for, not SIGPIPE's death: the replay
	// lines must reach the user.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, interrupts))
}

// interruptFunc starts catching interrupts: it returns a channel closed at
// the first one, and a function that stops catching them.
type interruptFunc func() (<-chan struct{}, func())

// interrupts catches SIGINT and SIGTERM: the first closes the channel and
// restores their default, so a second ends statesim at once.
func interrupts() (<-chan struct{}, func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	c, released := make(chan struct{}), make(chan struct{})
	go func() {
		select {
		case <-sig:
			signal.Stop(sig)
			close(c)
		case <-released:
		}
	}()
	return c, func() {
		signal.Stop(sig)
		close(released)
	}
}

// run is main with its arguments and outputs, returning the exit status.
// A run of -seeds catches interrupts with interrupted (nil: none).
func run(args []string, stdout, stderr io.Writer, interrupted interruptFunc) int {
	opt, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "statesim:", err)
		return exitUsage
	}
	if opt.worker {
		return serveWorker(opt, os.Stdin, stdout)
	}
	out := &cliout.FallbackWriter{W: stdout, Stderr: stderr, Prog: "statesim"}
	var code int
	if opt.seeds == 0 {
		code = runOne(opt, out, stderr)
	} else {
		code = runMany(opt, out, stderr, interrupted)
	}
	if out.Err != nil && code == exitOK {
		return exitUsage
	}
	return code
}

// parse reads the flags. It returns flag.ErrHelp for -h.
func parse(args []string, stderr io.Writer) (options, error) {
	opt := options{cfg: sim.DefaultConfig(1)}
	fs := flag.NewFlagSet("statesim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: statesim -seed N [flags]\n       statesim -seeds K [-from S] [-parallel P] [flags]\n\n")
		fs.PrintDefaults()
	}
	st := opt.cfg.Flags(fs)
	fs.IntVar(&opt.seeds, "seeds", 0, "run this many seeds, from -from (0: run -seed alone)")
	fs.Uint64Var(&opt.from, "from", 1, "the first seed of -seeds")
	fs.IntVar(&opt.parallel, "parallel", runtime.NumCPU(), "worker processes for -seeds (1: run in this process)")
	fs.BoolVar(&opt.verbose, "v", false, "print every event of the run (with -seeds: runs one at a time)")
	fs.StringVar(&opt.htmlDir, "html", ".", "directory for porcupine's HTML view of a failing run")
	fs.BoolVar(&opt.shrink, "shrink", false, "look for a smaller run that fails the same check")
	fs.IntVar(&opt.shrinkMax, "shrink-runs", 64, "most runs -shrink makes")
	fs.BoolVar(&opt.keepGoing, "keep-going", false, "with -seeds: run every seed even after a failure (the first failure is printed in full, each other with its replay line)")
	fs.BoolVar(&opt.worker, "worker", false, "internal: serve seeds read from stdin (used by -parallel)")
	if err := fs.Parse(args); err != nil {
		return opt, err
	}
	if fs.NArg() > 0 {
		return opt, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := st.Finish(); err != nil {
		return opt, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch {
	case opt.seeds > 0 && given["seed"]:
		return opt, fmt.Errorf("-seed with -seeds: the seeds start at -from (-from %d -seeds %d)", opt.cfg.Seed, opt.seeds)
	case opt.seeds == 0 && given["from"]:
		return opt, errors.New("-from without -seeds: run one seed with -seed")
	case opt.seeds == 0 && given["keep-going"]:
		return opt, errors.New("-keep-going without -seeds: one seed stops at its end anyway")
	case opt.seeds == 0 && given["parallel"]:
		return opt, errors.New("-parallel without -seeds: one seed runs in this process")
	case opt.seeds < 0:
		return opt, fmt.Errorf("-seeds %d: want >= 0", opt.seeds)
	case opt.parallel < 1:
		return opt, fmt.Errorf("-parallel %d: want >= 1", opt.parallel)
	case opt.shrinkMax < 1:
		return opt, fmt.Errorf("-shrink-runs %d: want >= 1", opt.shrinkMax)
	case opt.seeds > 0 && opt.from+uint64(opt.seeds-1) < opt.from:
		return opt, fmt.Errorf("-from %d -seeds %d: past the last seed", opt.from, opt.seeds)
	}
	if opt.verbose {
		opt.parallel = 1
	}
	if opt.seeds > 0 {
		opt.parallel = min(opt.parallel, opt.seeds) // a worker more would have no seed
	}
	return opt, nil
}

// runOne runs -seed alone.
func runOne(opt options, stdout, stderr io.Writer) int {
	cfg := opt.cfg
	if opt.verbose {
		cfg.Trace = stdout
	}
	res := runSeed(cfg, opt.htmlDir)
	fmt.Fprintln(stdout, res.summaryLine())
	if res.Err == "" {
		fmt.Fprintln(stdout, res.checkLine(cfg.CheckTimeout))
	}
	if res.ok() {
		return exitOK
	}
	printFailure(stdout, opt, res)
	return exitViolation
}
