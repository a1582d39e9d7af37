// Command statestress attacks statekit's real path: several worker
// processes share one state file on disk (or one Redis server, -redis) and run every verb from several
// goroutines each while the driver kills random workers with SIGKILL and
// restarts them; then it checks the whole history for linearizability, the
// fencing tokens, the counters and buffered increments, the clocks and the
// file's integrity. It prints what it did and the verdict; a run that did
// not pass also prints a command line that runs it again (the seed fixes
// the workload, not the interleaving) and keeps its files. Exit status: 0
// for a pass, 1 for a violation, 2 for bad flags or a run that could not
// run or finish: interrupted (SIGINT or SIGTERM stop the attack, and what
// ran is checked and reported; a second one ends statestress at once), or
// a report that could not be written to stdout (it goes to stderr), or a
// check that reached -check-limit. -check-timeout bounds the search of each
// partition of the history; -check-limit (none by default) bounds the whole
// linearizability check, which over many slow partitions can take hours: a
// check that reaches it stops, the other checks run, and the report says
// how far it got.
//
// Workers open the file with the engine's default options: the real
// clock, and the background sweeper, flusher and checkpointer, so kills
// land in group commits and background checkpoints. -step-clock runs them
// as the first stress runs did: a clock that moves only between calls, no
// background work, one call at a time. Beside them run -readers read-only
// workers (1 by default; none with -step-clock or on Redis), which open the
// file as statectl does, read-only and without background work, and only
// Get and TTL keys; kills reach them too.
//
//	statestress                                  # 4 processes of 4 goroutines and a reader, 10s, a kill every 250ms
//	statestress -procs 8 -duration 2m -kill-every 100ms
//	statestress -step-clock -duration 60s        # stepped clock, no background work
//	for s in 1 2 3 4 5; do statestress -seed $s -duration 60s || break; done   # longer: several runs
//	statestress -until-calls 5000 -until-kills 20 -duration 5m   # until that much is done; failing at 5m
//	statestress -bug lease-two-statements -until-contended 100 -expect duplicate-token   # the canary
//	statestress -dir /var/tmp/run -keep          # keep the files to look at
//
// -redis attacks a Redis server instead of a file: statestress starts a
// redis-server of its own (appendonly yes, appendfsync always) in the
// run's directory, the workers open it through a redis:// URL, and the
// driver also SIGKILLs the server now and then (-server-kill-every) and
// restarts it on the same port and directory. -redis-url attacks a server
// you run instead (never killed): the run's keys get a prefix of their own,
// stress:<seed>:<time>: after the URL's prefix, and every key under it is
// deleted when the run ends, pass or fail, and no other key (the report's
// keys: line says how many). -redis-no-persistence is the negative control: a server with
// appendonly no, which a restart empties, must be caught handing out a
// fencing token twice.
//
//	statestress -redis -until-calls 5000 -until-kills 10 -until-server-kills 3
//	statestress -redis -server-kill-every 500ms -duration 60s
//	statestress -redis -redis-no-persistence -until-server-kills 2 -expect duplicate-token   # the negative control
//	statestress -redis-url redis://127.0.0.1:6379/0 -duration 30s
//
// With any -until flag the run stops as soon as it has done that much
// work, and -duration (5m unless given) is a cap: a run that reaches it
// first fails, saying how much it did. The files go to a new directory
// under -dir (the system's temporary directory by default), removed after
// a run that passed unless -keep.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/internal/cliout"
	_ "github.com/statekit/statekit/redisstate" // redis:// URLs, for -redis and -redis-url
	"github.com/statekit/statekit/stress"
)

// defaultOps bounds a run's history: the check holds all of it in memory
// (the driver peaks near 2.5 KB a call, porcupine's search included), so a
// longer attack is better run as several runs, each with its own seed.
const defaultOps = 1_000_000

// Exit statuses.
const (
	exitPass      = 0
	exitViolation = 1
	exitUsage     = 2 // bad flags, or a run that could not run or finish
)

func main() {
	stress.WorkerMain()
	// A closed stdout (statestress | head) returns EPIPE, and the report
	// goes to stderr, rather than SIGPIPE ending statestress as it writes
	// (Notify, not Ignore: workers would inherit an ignored SIGPIPE).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends statestress at once
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// plan is a run as its flags ask for it: the stress configuration and
// what the command itself does with the run.
type plan struct {
	cfg        stress.Config
	fs         *flag.FlagSet // the flags as given, for the rerun line
	mode, what string        // the start line's words for the run
	kills      string
	expect     string
	checkLimit time.Duration
	dir        string
	keep       bool
}

// run parses args, runs the stress test until it is done or ctx ends, and
// returns the exit status. With -expect KIND the run passes when it finds
// a violation of that kind, and fails otherwise.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	p, code := parse(args, stderr)
	if p == nil {
		return code
	}
	runDir, err := os.MkdirTemp(p.dir, "statestress-")
	if err != nil {
		fmt.Fprintln(stderr, "statestress:", err)
		return exitUsage
	}
	cfg := p.cfg
	cfg.Dir = runDir
	// The seed and the command line come first, for a run killed before
	// its report.
	fmt.Fprintf(stderr, "statestress: seed %d: %s %s, %s, in %s; rerun: %s\n", cfg.Seed, p.mode, p.what, p.kills, runDir, rerunLine(p.fs, cfg.Seed))
	rep, err := stress.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "statestress:", err)
		keptOrRemoved(stderr, runDir)
		return exitUsage
	}
	out := &cliout.FallbackWriter{W: stdout, Stderr: stderr, Prog: "statestress"}
	_, _ = rep.WriteTo(out)
	code = verdict(rep, p.expect, p.checkLimit, out)
	if code == exitPass && out.Err != nil {
		code = exitUsage // its report is not where it was asked for
	}
	// A run that passed leaves nothing behind, unless its report names a
	// file in it (porcupine's view of the violation -expect asked for).
	if code == exitPass && !p.keep && rep.HTML == "" {
		os.RemoveAll(runDir)
		return code
	}
	fmt.Fprintf(out, "rerun:       %s\n", rerunLine(p.fs, cfg.Seed))
	fmt.Fprintf(out, "files:       %s\n", runDir)
	return code
}

// parse reads args into a plan, or returns nil and the exit status, having
// said why on stderr (-h: the usage, and exitPass).
func parse(args []string, stderr io.Writer) (*plan, int) {
	fs := flag.NewFlagSet("statestress", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: statestress [flags]\n\n"+
			"Worker processes attack one state file (or a Redis server) while the driver\n"+
			"SIGKILLs them, then every check runs over what they recorded. Exit status:\n"+
			"0 pass, 1 violation, 2 bad flags or a run that could not run or finish\n"+
			"(interrupted, or its report not written).\n\n")
		fs.PrintDefaults()
	}
	procs := fs.Int("procs", stress.DefaultProcesses, "worker processes at once")
	readers := fs.Int("readers", stress.DefaultReaders, "read-only worker processes beside the -procs ones, each opening the file as statectl does and only reading (0 with -step-clock, -redis or -redis-url)")
	goroutines := fs.Int("goroutines", stress.DefaultGoroutines, "goroutines calling verbs in each worker, each its own client (1 with -step-clock)")
	stepClock := fs.Bool("step-clock", false, "run the workers on a stepped clock, without background work, one call at a time")
	duration := fs.Duration("duration", stress.DefaultDuration, "how long to attack; with an -until flag, the cap, "+stress.DefaultCap.String()+" unless given")
	ops := fs.Int("ops", defaultOps, "stop after this many calls (0: no bound)")
	var until stress.Work
	fs.IntVar(&until.Calls, "until-calls", 0, "stop once this many calls are recorded")
	fs.IntVar(&until.Kills, "until-kills", 0, "stop once this many workers were killed")
	fs.IntVar(&until.Grants, "until-grants", 0, "stop once this many lease grants were seen")
	fs.IntVar(&until.Contended, "until-contended", 0, "stop once this many grants overlapped another process's lease call")
	fs.IntVar(&until.Swept, "until-swept", 0, "stop once recorded sweeps deleted this many expired keys")
	fs.IntVar(&until.ServerKills, "until-server-kills", 0, "with -redis, stop once the server was killed and restarted this many times")
	killEvery := fs.Duration("kill-every", stress.DefaultKillEvery, "mean time between two SIGKILLs (0 or less: none)")
	redis := fs.Bool("redis", false, "attack a redis-server this run starts (AOF, appendfsync always) instead of a file, and SIGKILL and restart it too")
	redisURL := fs.String("redis-url", "", "attack the Redis server at this redis:// URL instead of a file (never killed; the run's keys, under a prefix of its own, are deleted when it ends)")
	serverKillEvery := fs.Duration("server-kill-every", stress.DefaultServerKillEvery, "with -redis, mean time between two SIGKILLs of the server, each followed by a restart (0 or less: none)")
	noPersistence := fs.Bool("redis-no-persistence", false, "with -redis, run the server with appendonly no (and allow_unsafe_leases=true): the negative control, which must find a duplicate token")
	seed := fs.Uint64("seed", 0, "seed of the workload and kill schedule (default: from the clock; the report names it)")
	bug := fs.String("bug", "", "plant a bug in every worker ("+fmt.Sprint(bugs.Names())+")")
	expect := fs.String("expect", "", "pass only if the run finds a violation of this kind (for a planted bug), such as "+stress.KindDuplicateToken)
	checkTimeout := fs.Duration("check-timeout", stress.DefaultCheckTimeout, "the linearizability search's time limit per partition (0: the default, 1m)")
	checkLimit := fs.Duration("check-limit", 0, "the whole linearizability check's time limit (0: none); a check that reaches it exits 2, saying how far it got")
	epoch := fs.Duration("epoch", stress.DefaultEpochEvery, "how long the workers use one set of keys (bounds the check's time and memory)")
	dir := fs.String("dir", "", "where to make the run's directory (default: the temporary directory)")
	keep := fs.Bool("keep", false, "keep the run's files even when it passes")
	verbose := fs.Bool("v", false, "print each kill")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil, exitPass
	} else if err != nil {
		return nil, exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "statestress: unexpected arguments %q\n", fs.Args())
		return nil, exitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["seed"] {
		*seed = uint64(time.Now().UnixNano())
	}
	if *stepClock && !set["goroutines"] {
		*goroutines = 1
	}
	if (*stepClock || *redis || *redisURL != "") && !set["readers"] {
		*readers = 0
	}
	if !until.IsZero() && !set["duration"] {
		*duration = stress.DefaultCap
	}
	switch {
	case *procs < 1 || *procs > stress.MaxProcesses || *duration <= 0 || *ops < 0 || *epoch <= 0:
		fmt.Fprintf(stderr, "statestress: want 1 to %d -procs, a positive -duration and -epoch, and -ops of 0 or more\n", stress.MaxProcesses)
		return nil, exitUsage
	case *goroutines < 1 || *goroutines > stress.MaxGoroutines || (*stepClock && *goroutines != 1):
		fmt.Fprintf(stderr, "statestress: want 1 to %d -goroutines, and 1 with -step-clock\n", stress.MaxGoroutines)
		return nil, exitUsage
	case *readers < 0 || *readers > stress.MaxReaders:
		fmt.Fprintf(stderr, "statestress: want 0 to %d -readers\n", stress.MaxReaders)
		return nil, exitUsage
	case *readers > 0 && (*stepClock || *redis || *redisURL != ""):
		fmt.Fprintln(stderr, "statestress: -readers open a file on the real clock, as statectl does: not with -step-clock, -redis or -redis-url")
		return nil, exitUsage
	case until.Calls < 0 || until.Kills < 0 || until.Grants < 0 || until.Contended < 0 || until.Swept < 0 || until.ServerKills < 0:
		fmt.Fprintln(stderr, "statestress: want -until flags of 0 or more")
		return nil, exitUsage
	case until.Kills > 0 && *killEvery <= 0:
		fmt.Fprintln(stderr, "statestress: -until-kills needs kills (-kill-every above 0)")
		return nil, exitUsage
	case *redis && *redisURL != "":
		fmt.Fprintln(stderr, "statestress: -redis starts a server of its own; -redis-url names yours: not both")
		return nil, exitUsage
	case !*redis && (*noPersistence || set["server-kill-every"] || until.ServerKills > 0):
		fmt.Fprintln(stderr, "statestress: -redis-no-persistence, -server-kill-every and -until-server-kills need -redis")
		return nil, exitUsage
	case until.ServerKills > 0 && *serverKillEvery <= 0:
		fmt.Fprintln(stderr, "statestress: -until-server-kills needs server kills (-server-kill-every above 0)")
		return nil, exitUsage
	case (*redis || *redisURL != "") && (*stepClock || *bug != ""):
		fmt.Fprintln(stderr, "statestress: -step-clock and -bug are for the file engine, not Redis")
		return nil, exitUsage
	case *expect != "" && !slices.Contains(stress.Kinds(), *expect):
		fmt.Fprintf(stderr, "statestress: -expect %q: no such kind of violation; want one of %v\n", *expect, stress.Kinds())
		return nil, exitUsage
	}
	cfg := stress.Config{Processes: *procs, Goroutines: *goroutines, StepClock: *stepClock, Duration: *duration,
		Until: until, MaxOps: *ops, KillEvery: *killEvery, Seed: *seed, CheckTimeout: *checkTimeout, CheckLimit: *checkLimit, EpochEvery: *epoch}
	if *killEvery <= 0 {
		cfg.KillEvery = -1
	}
	cfg.Readers = *readers
	if *readers == 0 {
		cfg.Readers = -1 // none; 0 would be the default
	}
	switch {
	case *redis:
		cfg.Redis = &stress.Redis{KillEvery: *serverKillEvery, NoPersistence: *noPersistence}
		if *serverKillEvery <= 0 {
			cfg.Redis.KillEvery = -1
		}
	case *redisURL != "":
		cfg.Redis = &stress.Redis{URL: *redisURL}
	}
	if *bug != "" {
		b, err := bugs.Parse(*bug)
		if err != nil {
			fmt.Fprintln(stderr, "statestress:", err)
			return nil, exitUsage
		}
		cfg.Bugs = cfg.Bugs.With(b)
	}
	if *verbose {
		cfg.Log = stderr
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "statestress:", err)
		return nil, exitUsage
	}
	mode := fmt.Sprintf("%d processes of %d goroutines on the default options", cfg.Processes, cfg.Goroutines)
	if *readers > 0 {
		mode = fmt.Sprintf("%d processes of %d goroutines (and %d read-only) on the default options", cfg.Processes, cfg.Goroutines, *readers)
	}
	switch {
	case cfg.StepClock:
		mode = fmt.Sprintf("%d processes on a stepped clock", cfg.Processes)
	case *redis && *noPersistence:
		mode = fmt.Sprintf("%d processes of %d goroutines on a redis-server without persistence, killed every %v on average,", cfg.Processes, cfg.Goroutines, *serverKillEvery)
	case *redis:
		mode = fmt.Sprintf("%d processes of %d goroutines on a redis-server (AOF, appendfsync always), killed every %v on average,", cfg.Processes, cfg.Goroutines, *serverKillEvery)
	case *redisURL != "":
		mode = fmt.Sprintf("%d processes of %d goroutines on the Redis server of -redis-url", cfg.Processes, cfg.Goroutines)
	}
	what := "for " + cfg.Duration.String()
	if !until.IsZero() {
		what = fmt.Sprintf("until %s (cap %v)", until.Asked(), cfg.Duration)
	}
	kills := fmt.Sprintf("a kill every %v on average", *killEvery)
	if *killEvery <= 0 {
		kills = "no kills"
	}
	return &plan{cfg: cfg, fs: fs, mode: mode, what: what, kills: kills,
		expect: *expect, checkLimit: *checkLimit, dir: *dir, keep: *keep}, exitPass
}

// verdict returns the exit status of a run that ran, and writes to out
// what -expect, an interruption and the check's limit make of it.
func verdict(rep *stress.Report, expect string, limit time.Duration, out io.Writer) int {
	interrupted := rep.Stopped == stress.StoppedInterrupted
	limited := rep.Has(stress.KindCheckLimit)
	found := false // a violation an interruption or the check's limit does not explain
	for _, v := range rep.Violations {
		found = found || !(interrupted && v.Kind == stress.KindShortRun) && v.Kind != stress.KindCheckLimit
	}
	switch {
	case expect != "" && rep.Has(expect):
		fmt.Fprintf(out, "expected:    a %s violation, found\n", expect)
		return exitPass
	case expect != "" && interrupted:
		fmt.Fprintf(out, "interrupted: after %v, before it found the %s violation it expects\n", rep.Elapsed.Round(time.Millisecond), expect)
		return exitUsage
	case expect != "" && limited:
		fmt.Fprintf(out, "check limit: the check stopped at -check-limit %v before it found the %s violation it expects\n", limit, expect)
		return exitUsage
	case expect != "":
		fmt.Fprintf(out, "expected:    a %s violation, and the run found none: the check missed the planted bug\n", expect)
		return exitViolation
	case found || rep.Dropped > 0:
		return exitViolation
	case interrupted:
		fmt.Fprintf(out, "interrupted: after %v; what ran passed every check, but the run did not finish\n", rep.Elapsed.Round(time.Millisecond))
		return exitUsage
	case limited:
		fmt.Fprintf(out, "check limit: the check stopped at -check-limit %v; what it checked passed, but it did not finish\n", limit)
		return exitUsage
	}
	return exitPass
}

// keptOrRemoved removes the directory of a run that could not run when it
// holds nothing, and otherwise says where its files are.
func keptOrRemoved(stderr io.Writer, runDir string) {
	if entries, err := os.ReadDir(runDir); err == nil && len(entries) == 0 {
		os.Remove(runDir)
		return
	}
	fmt.Fprintf(stderr, "statestress: the run's files are in %s\n", runDir)
}
