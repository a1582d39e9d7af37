// Command statebench measures statekit's verbs against the baseline each one
// replaces, interleaved in one run on one disk, and prints the ratios the
// performance targets are stated in.
//
//	statebench                                         # every scenario: 1s a side, 3 rounds, 1M-row sweep and open
//	statebench -benchtime 200ms -count 1 -rows 20000   # a quick run for CI
//	statebench -run 'incr|get' -benchtime 5000x
//	statebench -run sweep -rows 200000 -cpuprofile cpu.prof  # then go tool pprof cpu.prof
//	statebench -run ratelimit -benchtime 500ms            # package ratelimit's limiters beside the naive Get+Set
//	statebench -run churn -churn 20s                      # 1 s-TTL keys set at full speed: does the sweep keep up?
//	statebench -run scale -scale                          # a 10-million-key file: sweep, Set+TTL, Incr (minutes)
//	statebench -app                                       # the rate-limit web app: two HTTP servers on one file beside Redis
//
// The baseline of the single-goroutine verbs is the naive one: database/sql
// prepared statements on the same modernc SQLite, with the same pragmas and
// statekit's kv table. A lease grant is measured against appending a record
// to a file and fdatasync. The two sides run in alternating slices of about
// 100 ms, so that both see the same noise of a shared machine, and a ratio
// is the median over the slices of one side's rate over the other's beside
// it. The table goes to stdout, the same results as JSON to -json (with the
// ratio of the totals and the sweep's transaction times). Files go to a new
// directory under -dir, which must be on the disk to measure (a tmpfs makes
// every sync free).
//
// statebench exits 1 if a scenario fails to run, or is not exact (a lost
// increment): the other scenarios run on, and the table and the JSON
// (its "failed" list) hold what they measured and name the failures; or if the command line would run nothing (a -run that
// matches no scenario, arguments that are not flags), 2 for a flag it does
// not take; a missed target is reported in the table, not as an error.
// The JSON is written before the table, so a stdout that cannot take the
// table (statebench | head) loses neither. Ctrl-C (130) or SIGTERM (143)
// ends it at once, its worker processes and files with it (unless -keep).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/statekit/statekit/internal/cliout"
)

// env is what every scenario runs with.
type env struct {
	ctx         context.Context
	dir         string        // where the database files go: one disk for both sides
	bt          budget        // per side per round
	count       int           // rounds, each running both sides
	rows        int           // rows of the sweep and open scenarios
	goroutines  int           // goroutines of the concurrent scenarios
	procs       []int         // process counts of the multi-process scenario
	exe         string        // this binary, re-executed for the multi-process scenario
	wait        string        // how the multi-process scenario's processes wait for the lock (procs.go)
	sweepRandom bool          // the sweep's rows expire in an order unrelated to their keys
	churn       time.Duration // how long the churn scenario's writer runs
	scale       bool          // run the scale scenario (it takes minutes)
	scaleKeys   int           // keys in the scale scenario's file
	app         bool          // run the app scenario
	appRequests int           // requests a flavour of the app scenario serves in a round
	appProfile  string        // -cpuprofile: the app's server processes write theirs beside it
	log         io.Writer
	files       int
}

// path returns a fresh file name in the run's directory.
func (e *env) path(name string) string {
	e.files++
	return fmt.Sprintf("%s/%02d-%s", e.dir, e.files, name)
}

// logf reports progress on stderr.
func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.log, "statebench: "+format+"\n", args...)
}

// scenario is one line (or a few) of the report.
type scenario struct {
	name string
	run  func(e *env) ([]Result, error)
}

// scenarios is every scenario, in report order.
var scenarios = []scenario{
	{"incr", runIncr},
	{"get", runGet},
	{"set-ttl", runSetTTL},
	{"cas", runCAS},
	{"lease", runLease},
	{"hot-key", runHotKey},
	{"processes", runProcesses},
	{"incr-buffered", runBuffered},
	{"ratelimit", runRateLimit},
	{"recipes", runRecipes},
	{"redis", runRedis},
	{"app", runApp},
	{"sweep", runSweep},
	{"churn", runChurn},
	{"scale", runScale},
	{"open", runOpen},
	{"memory", runMemory},
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		if err := child(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "statebench child:", err)
			os.Exit(1)
		}
		return
	}
	// A closed stdout is a write error the table falls back to stderr
	// for, not SIGPIPE's death.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	var usage usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "statebench:", err)
		os.Exit(1)
	}
}

// run is main with its arguments and outputs.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("statebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	benchtime := fs.String("benchtime", "1s", "how long each side runs per round: a duration, or a count like 5000x")
	count := fs.Int("count", 3, "rounds; each runs the subject and the baseline, alternating which goes first")
	rows := fs.Int("rows", 1_000_000, "rows in the sweep and open scenarios (use a small value in CI)")
	goroutines := fs.Int("goroutines", 8, "goroutines in the hot-key and buffered scenarios")
	procs := fs.String("procs", "2,4,8", "process counts of the multi-process scenario, comma separated")
	wait := fs.String("wait", waitEngine, "how the multi-process scenario's processes wait for another's lock: engine, sqlite (SQLite's busy schedule, which the engine used before its short one) or flock")
	dir := fs.String("dir", "", "directory for the database files (default: a new directory under the system temp dir)")
	keep := fs.Bool("keep", false, "keep the database files")
	jsonPath := fs.String("json", "statebench.json", "write the results as JSON here; empty for none")
	runRE := fs.String("run", "", "run only the scenarios matching this regular expression")
	sweepOrder := fs.String("sweep-order", "written", "the order the sweep's rows expire in: written (the order their keys were written) or random")
	churn := fs.Duration("churn", time.Minute, "how long the churn scenario's writer sets 1 s-TTL keys")
	scale := fs.Bool("scale", false, "also run the scale scenario: sweep, Set+TTL and Incr on a file of -scale-keys keys (minutes)")
	scaleKeys := fs.Int("scale-keys", 10_000_000, "keys in the scale scenario's file, a tenth of them expired")
	app := fs.Bool("app", false, "run the rate-limit web app scenario (alone, unless -run names others): two HTTP server processes on one file beside the same over a loopback redis-server")
	appRequests := fs.Int("app-requests", 20_000, "requests each flavour of the app scenario serves in a round")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run here (go tool pprof)")
	if err := fs.Parse(args); err != nil {
		return usageError{err} // fs said what, with the usage
	}
	if fs.NArg() > 0 {
		// A -run pattern the shell split (-run incr get) would start
		// the full run, minutes long, without a word.
		return fmt.Errorf("unexpected arguments %q: statebench takes flags only (quote a -run pattern that holds spaces)", fs.Args())
	}

	if *sweepOrder != "written" && *sweepOrder != "random" {
		return fmt.Errorf("-sweep-order %q: want written or random", *sweepOrder)
	}
	bt, err := parseBudget(*benchtime)
	if err != nil {
		return err
	}
	if *wait != waitEngine && *wait != waitSQLite && *wait != waitFlock {
		return fmt.Errorf("-wait %q: want engine, sqlite or flock", *wait)
	}
	if *count < 1 || *rows < 1 || *goroutines < 1 || *churn <= 0 || *scaleKeys < 10 || *appRequests < 1 {
		return errors.New("-count, -rows, -goroutines, -churn and -app-requests must be positive, -scale-keys at least 10")
	}
	if *app && *runRE == "" {
		*runRE = "^app$"
	}
	procCounts, err := parseCounts(*procs)
	if err != nil {
		return fmt.Errorf("-procs: %w", err)
	}
	re, err := regexp.Compile(*runRE)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	var chosen []scenario
	var names []string
	for _, s := range scenarios {
		names = append(names, s.name)
		if re.MatchString(s.name) && (s.name != "scale" || *scale) && (s.name != "app" || *app) {
			chosen = append(chosen, s)
		}
	}
	if len(chosen) == 0 {
		return fmt.Errorf("-run %q matches no scenario (of %s; scale and app also need -scale and -app)", *runRE, strings.Join(names, ", "))
	}
	if *jsonPath != "" {
		if _, err := os.Stat(filepath.Dir(*jsonPath)); err != nil {
			return fmt.Errorf("-json %s: %w", *jsonPath, err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	work, err := os.MkdirTemp(*dir, "statebench-")
	if err != nil {
		return fmt.Errorf("make work dir: %w", err)
	}
	if !*keep {
		defer os.RemoveAll(work)
	}
	// Ctrl-C or a SIGTERM ends the run at once (the worker processes die
	// with statebench): the files go with it, unless -keep.
	stopSignals := onSignal(func(code int) {
		if !*keep {
			os.RemoveAll(work)
		}
		os.Exit(code)
	})
	defer stopSignals()
	e := &env{ctx: context.Background(), dir: work, bt: bt, count: *count, rows: *rows,
		goroutines: *goroutines, procs: procCounts, exe: exe, wait: *wait, log: stderr, sweepRandom: *sweepOrder == "random",
		churn: *churn, scale: *scale, scaleKeys: *scaleKeys, app: *app, appRequests: *appRequests, appProfile: *cpuProfile}
	rep := newReport(e)
	e.logf("files in %s; benchtime %v, count %d, rows %d", work, bt, *count, *rows)
	for _, s := range chosen {
		e.logf("%s", s.name)
		start := time.Now()
		res, err := s.run(e)
		if err != nil {
			// The others run on: a late scenario's failure must not
			// take the results of a run minutes long with it.
			e.logf("%s: FAILED after %v: %v", s.name, time.Since(start).Round(time.Millisecond), err)
			rep.Failed = append(rep.Failed, Failure{Scenario: s.name, Error: err.Error()})
			continue
		}
		e.logf("%s: done in %v", s.name, time.Since(start).Round(time.Millisecond))
		rep.Results = append(rep.Results, res...)
	}
	// The JSON first: a table stdout cannot take (statebench | head)
	// must not lose it.
	if *jsonPath != "" {
		if err := rep.writeJSON(*jsonPath); err != nil {
			return err
		}
	}
	out := &cliout.FallbackWriter{W: stdout, Stderr: stderr, Prog: "statebench"}
	rep.print(out)
	var errs []error
	for _, f := range rep.Failed {
		errs = append(errs, fmt.Errorf("%s: %s", f.Scenario, f.Error))
	}
	if out.Err != nil {
		errs = append(errs, fmt.Errorf("the table could not be written to stdout: %w", out.Err))
	}
	return errors.Join(errs...)
}

// onSignal calls exit with 130 at SIGINT, 143 at SIGTERM, until stop.
func onSignal(exit func(code int)) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			code := 130
			if sig == syscall.SIGTERM {
				code = 143
			}
			exit(code)
		case <-done:
		}
	}()
	return func() { signal.Stop(sigs); close(done) }
}

// usageError is a command line the flag set refused, having said so.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }
