package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/statekit/statekit/state"
)

// Bounds of run.
const (
	minRunTTL = 100 * time.Millisecond
	// maxPoll bounds the pause between two tries for a held lease.
	maxPoll = 250 * time.Millisecond
	// minPoll keeps a holder whose lease is about to end from being
	// asked in a tight loop.
	minPoll = 10 * time.Millisecond
)

var runCommand = &command{
	name:    "run",
	args:    "FILE --lease NAME [--ttl D] [--owner ID] [--wait D] -- CMD [ARG...]",
	summary: "run a command while holding a lease: one copy at a time",
	details: `
Take the lease NAME in FILE (or wait up to --wait for it), run CMD with its
fencing token in STATEKIT_FENCING_TOKEN and the lease name in STATEKIT_LEASE,
renew the lease every third of its ttl while CMD runs, release it when CMD
exits, and exit with CMD's status (128+N when CMD died of signal N). Like
flock(1), but the lease ends by itself when its holder stops renewing it,
and the token lets a resource refuse a stale holder: have CMD pass it on.

When another owner holds the lease, run exits 75 naming the holder and its
time left; with --wait it waits for the lease up to D, and for the file too
while another process holds its write lock (exit 2 if it is still busy).
Without --wait, run waits for a busy file as any write does, up to its busy
timeout: a third of the ttl, at most 5s. With --wait, D counts from the first
try that found the lease held or the file busy, and each try (opening the
file, looking at the lease, taking it) waits for a busy file no longer than
what is left of D, or a quarter of a second when less is left (so a D
shorter than the busy timeout waits less for it); only closing the file may
still wait out a busy timeout past D. If a renewal fails because the lease was lost (this process was paused past its
ttl and another owner took the lease), run says so on stderr and sends CMD
SIGTERM; it then waits for CMD and exits 76, whatever CMD's status. It
exits 76 too when CMD exits before a renewal noticed, but after the lease
could have run out (run was paused or starved), and the release finds it
lost. So does a run whose renewals keep failing until the ttl has run out:
on a file busy that long, or over a URL on a server that does not answer
(a renewal waits for the server until the lease could have run out).
Signals sent to run (HUP, INT, QUIT, TERM, USR1, USR2) are passed on to CMD;
INT and QUIT typed at a terminal reach CMD from the terminal itself, so run
does not pass those on a second time while its stdin is the terminal and it
is in the terminal's foreground. On Linux, CMD gets SIGTERM if run itself dies. If CMD cannot be
started, run exits 127 (not found) or 126.

The owner defaults to HOST:PID; an empty --owner is refused. Two live runs
with the same --owner still exclude each other: a run that finds the lease
held by its own owner watches it for up to half its time left. If it is renewed, another live run of that
owner holds it, and run exits 75 (or waits) as for another owner. If not, the
run that held it died (a supervisor restarted with its --owner), and run
takes the lease over at once with a new token, not waiting out its ttl. Two
runs of one owner that find the lease free at the same moment do not both
run CMD: the second grant extends the first one's lease, and its run watches
that lease as above.`,
	example: `
$ statectl run app.state --lease nightly --ttl 30s -- ./nightly.sh
$ statectl run app.state --lease nightly --ttl 30s -- ./nightly.sh
statectl: app.state: lease "nightly" is held by "web-1:4242" for 24.1s more
$ echo $?
75
$ statectl run app.state --lease nightly --wait 1m -- sh -c 'echo token $STATEKIT_FENCING_TOKEN'
statectl: app.state: lease "nightly" is held by "web-1:4242" for 24.1s more; waiting up to 1m0s
token 13`,
	minArgs: 1, maxArgs: 1, takesCommand: true,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		o := runOptions{ttl: 30 * time.Second}
		fs.StringVar(&o.lease, "lease", "", "the lease `NAME` (required)")
		fs.Var(durationFlag{&o.ttl}, "ttl", "the lease's time to live `D`, renewed every D/3")
		fs.StringVar(&o.owner, "owner", "", "the owner `ID` recorded with the lease (default HOST:PID)")
		fs.Var(durationFlag{&o.wait}, "wait", "wait up to `D` for a held lease or a busy file instead of exiting 75 or 2")
		return func(a *app, pos, cmdArgs []string) error {
			fs.Visit(func(f *flag.Flag) {
				o.leaseGiven = o.leaseGiven || f.Name == "lease"
				o.ownerGiven = o.ownerGiven || f.Name == "owner"
			})
			return runLeased(a, pos[0], o, cmdArgs)
		}
	},
}

// runOptions are run's flags.
type runOptions struct {
	lease, owner string
	leaseGiven   bool // --lease was on the command line, empty or not
	ownerGiven   bool // --owner was on the command line, empty or not
	ttl, wait    time.Duration
}

func (o *runOptions) check(cmdArgs []string) error {
	switch {
	case o.leaseGiven && o.lease == "":
		return usageError("run", "--lease is empty: name the lease to take")
	case o.lease == "":
		return usageError("run", "--lease is missing")
	case o.ttl < minRunTTL:
		return usageError("run", "--ttl %s is below the minimum %s", o.ttl, minRunTTL)
	case o.wait < 0:
		return usageError("run", "--wait %s is negative", o.wait)
	case len(cmdArgs) == 0:
		return usageError("run", "the command to run is missing after --")
	case o.ownerGiven && o.owner == "":
		// An empty owner taken for the default would make two runs
		// that mean to share an owner two different owners.
		return usageError("run", "--owner is empty: leave it out for the default HOST:PID")
	}
	if o.owner == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		o.owner = host + ":" + strconv.Itoa(os.Getpid())
	}
	return nil
}

func runLeased(a *app, path string, o runOptions, cmdArgs []string) (err error) {
	if err := o.check(cmdArgs); err != nil {
		return err
	}
	bin, err := exec.LookPath(cmdArgs[0])
	switch {
	case errors.Is(err, os.ErrNotExist):
		return exit(exitNotFound, "run: %s: no such file", cmdArgs[0])
	case errors.Is(err, exec.ErrNotFound):
		return exit(exitNotFound, "run: %s: executable file not found in $PATH", cmdArgs[0])
	case errors.Is(err, os.ErrPermission):
		return exit(exitNoExec, "run: %s: permission denied", cmdArgs[0])
	case err != nil:
		return exit(exitNoExec, "run: %s: %v", cmdArgs[0], errors.Unwrap(err))
	}
	grant := func(db *state.DB) error {
		_, err := db.Lease(context.Background(), o.lease, o.owner, o.ttl)
		return err
	}
	if err := checkInput(path, grant); err != nil {
		return err
	}
	// Catch signals from the start, so one that comes while run waits
	// for the lease or starts CMD ends it cleanly instead of killing it.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	w := newWaiter(a, path, o, sigs)
	db, err := openForRun(path, w)
	if err != nil {
		return err
	}
	defer closeDB(db, path, &err)

	l, granted, err := acquire(db, w)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, cmdArgs[1:]...)
	cmd.Args[0] = cmdArgs[0]
	cmd.Env = append(os.Environ(),
		"STATEKIT_FENCING_TOKEN="+strconv.FormatInt(l.Token, 10),
		"STATEKIT_LEASE="+l.Name)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.rawStdout(), a.stderr
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		release(a, db, path, l)
		return exit(exitNoExec, "run: %s: %v", cmdArgs[0], err)
	}
	status, lost, held := supervise(a, db, path, l, o.ttl, granted, cmd, sigs)
	var released error
	if !lost {
		released = release(a, db, path, l)
	}
	return runEnd(shown(path)+": lease "+quote(l.Name), cmdArgs[0], status, lost, held, released)
}

// runEnd is run's exit once CMD exited with status: lease names the
// lease, lost says a renewal found it lost (the lease was not released
// then), held that CMD was seen to exit while the lease was certainly
// held, and released is the release's error. A lease lost while CMD ran
// is exit 76 whatever CMD's status: its work was cut short or went on
// without the lease. So is a CMD that exited after the lease could have
// run out, before a renewal noticed (run was paused or starved), when the
// release did not show the lease was still held.
func runEnd(lease, name string, status int, lost, held bool, released error) error {
	switch {
	case lost:
		return exit(exitLost, "%s was lost while %s ran (it exited with status %d)", lease, name, status)
	case !held && errors.Is(released, state.ErrLeaseLost):
		return exit(exitLost, "%s was lost while %s ran: it ran out before run saw %s exit (it exited with status %d)",
			lease, name, name, status)
	case !held && released != nil:
		return exit(exitLost, "%s may have been lost while %s ran: it could have run out before run saw %s exit, and releasing it failed (it exited with status %d)",
			lease, name, name, status)
	case status == exitOK:
		return nil
	}
	return exit(status, "")
}

// supervise waits for cmd while the lease is renewed, passing signals on,
// and sends cmd SIGTERM if the lease is lost. It returns cmd's exit status,
// whether the lease was lost, and whether cmd was seen to exit while the
// lease was certainly held (within the ttl of its grant or of its last
// renewal).
func supervise(a *app, db *state.DB, path string, l *state.Lease, ttl time.Duration, granted time.Time,
	cmd *exec.Cmd, sigs <-chan os.Signal) (status int, lost, held bool) {
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is in cmd.ProcessState
		close(done)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	lostCh := make(chan error, 1)
	var wg sync.WaitGroup
	var ends time.Time
	wg.Add(1)
	go func() {
		defer wg.Done()
		ends = keep(ctx, a, db, path, l, ttl, granted, lostCh)
	}()
	for {
		select {
		case <-done:
			exited := time.Now()
			cancel()
			wg.Wait()
			return exitStatus(cmd.ProcessState), lost, exited.Before(ends)
		case sig := <-sigs:
			if !fromTerminal(sig) {
				_ = cmd.Process.Signal(sig)
			}
		case err := <-lostCh:
			lost = true
			a.errorf("%s: lease %s lost (token %d): %s; sending SIGTERM to %s (pid %d)",
				shown(path), quote(l.Name), l.Token, cause(db, err), cmd.Args[0], cmd.Process.Pid)
			_ = cmd.Process.Signal(terminate)
		}
	}
}

// keep renews l every third of its ttl until ctx ends. It reports on lost
// when the lease is gone: a renewal found it expired, released or granted
// anew, or renewals kept failing until its ttl ran out. It returns the time
// until which, by this process's clock, the lease was certainly held: the
// ttl after its grant or its last renewal.
func keep(ctx context.Context, a *app, db *state.DB, path string, l *state.Lease, ttl time.Duration,
	granted time.Time, lost chan<- error) time.Time {
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	ends := granted.Add(ttl) // by this process's clock, held at least until then
	for {
		select {
		case <-ctx.Done():
			return ends
		case <-t.C:
		}
		start := time.Now()
		err := renew(ctx, db, path, l, ttl, ends)
		switch {
		case err == nil:
			ends = start.Add(ttl)
		case ctx.Err() != nil:
			return ends
		case errors.Is(err, state.ErrLeaseLost):
			lost <- err
			return ends
		case !time.Now().Before(ends):
			lost <- fmt.Errorf("renewals failed until the ttl ran out: %w", err)
			return ends
		default:
			a.errorf("%s: renewing lease %s failed, will retry: %s", shown(path), quote(l.Name), cause(db, err))
		}
	}
}

// renew renews l once, certainly held until ends. On a file the busy
// timeout bounds a renewal (runBusyTimeout). Over a URL the renewal waits
// for the server until ends, or a busy timeout when less is left: a server
// that stopped answering (stopped, or cut off by the network) would
// otherwise hold it for the client's read timeout, seconds past a short
// ttl, while CMD ran on without the lease. Unanswered by then, the lease
// may have run out, and keep tells CMD.
func renew(ctx context.Context, db *state.DB, path string, l *state.Lease, ttl time.Duration, ends time.Time) error {
	if isURL(path) {
		deadline := time.Now().Add(runBusyTimeout(ttl))
		if ends.After(deadline) {
			deadline = ends
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	return db.Renew(ctx, l, ttl)
}

// release ends the lease, warning when it was lost meanwhile, and returns
// Release's error.
func release(a *app, db *state.DB, path string, l *state.Lease) error {
	err := db.Release(context.Background(), l)
	if err != nil {
		a.errorf("%s: releasing lease %s: %s", shown(path), quote(l.Name), cause(db, err))
	}
	return err
}

// cause is err's message without the file or URL db names in it: the
// message it goes into names it first.
func cause(db *state.DB, err error) string {
	return oneLine(unprefix(strings.ReplaceAll(err.Error(), db.Path()+": ", "")))
}
