// Command statectl sees and steers a statekit state file from the shell, and
// runs one copy of a job at a time under a lease.
//
//	statectl dump app.state --prefix rate:
//	statectl leases app.state --all
//	statectl incr app.state hits --ttl 1m
//	statectl run app.state --lease nightly --ttl 30s -- ./nightly.sh
//
// Read commands (dump, leases, info, check, get, ttl) open the file
// read-only: they never create, change or advance anything in it or beside
// it (a file no process has open is read from a private copy) and are safe
// beside a running application. Write commands create a missing file.
//
// Where a file goes, a URL of a store on a Redis server works too:
//
//	statectl get 'redis://:password@10.0.0.5:6379/0?prefix=app:' hits
//
// Exit status: 0 on success; 1 for "not found", "not swapped", "nothing
// deleted" and check findings; 2 for errors (one line on stderr naming the
// file and the cause); 75 when run finds the lease held by another owner;
// 76 when run's lease was lost while its command ran. run otherwise exits
// with its command's status (128+N when it died of signal N).
//
// Run "statectl help" for the commands and "statectl COMMAND --help" for a
// command's flags and an example.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/redis/go-redis/v9/logging"
	_ "github.com/statekit/statekit/redisstate" // redis:// URLs
)

func main() {
	// statectl says what failed in one line of its own; the Redis client
	// would also log each failed dial.
	logging.Disable()
	catchBrokenPipe()
	a := &app{
		stdin:      os.Stdin,
		stdout:     os.Stdout,
		stderr:     &lockedWriter{w: os.Stderr},
		tty:        isTerminal(os.Stdout),
		brokenPipe: dieOfBrokenPipe,
	}
	os.Exit(a.main(os.Args[1:]))
}

// app is one invocation of statectl: its standard streams and whether
// stdout is a terminal.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	tty    bool // stdout is a terminal: align columns under a header
	// hide replaces each URL of the command line that holds a password
	// with the URL as messages show it: a last guard, every message
	// names a URL through shown already.
	hide *strings.Replacer
	// brokenPipe, if set, ends statectl when stdout was a closed pipe,
	// once the command has closed its file (signals_unix.go).
	brokenPipe func()
}

// main runs the command args name and returns the exit status.
func (a *app) main(args []string) int {
	out := &stickyWriter{w: a.stdout}
	a.stdout = out
	err := a.dispatch(args)
	if errors.Is(out.err, syscall.EPIPE) && a.brokenPipe != nil {
		a.brokenPipe()
	}
	if out.err != nil {
		// What the command printed is its answer: an answer that could
		// not be written fails the command, whatever it did. (A command
		// that stopped at the failed write says so as it is, not as an
		// error of its file.)
		if err == nil || errors.Is(err, out.err) {
			err = exit(exitError, "%s", out.err)
		} else if code, _ := describe(err); code == exitNo {
			err = exit(exitError, "%s", out.err)
		}
	}
	if err == nil {
		return exitOK
	}
	code, msg := describe(err)
	if msg != "" {
		fmt.Fprintf(a.stderr, "statectl: %s\n", a.redact(msg))
	}
	return code
}

// errorf prints one line on stderr, prefixed with the program's name.
func (a *app) errorf(format string, args ...any) {
	fmt.Fprint(a.stderr, a.redact(fmt.Sprintf("statectl: "+format+"\n", args...)))
}

// hidePasswords has redact hide the password of each URL in args.
func (a *app) hidePasswords(args []string) {
	var pairs []string
	for _, arg := range args {
		if s := shown(arg); s != arg {
			pairs = append(pairs, arg, s)
		}
	}
	if pairs != nil {
		a.hide = strings.NewReplacer(pairs...)
	}
}

// redact returns msg with no password of a URL of the command line.
func (a *app) redact(msg string) string {
	if a.hide == nil {
		return msg
	}
	return a.hide.Replace(msg)
}

// isTerminal reports whether f is a terminal: one that answers a
// terminal's ioctl, not any character device (/dev/null is one too).
func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd())
}

// stickyWriter is stdout: it keeps the first error of a write, for main
// to fail the command with even where the command did not look at it.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil && s.err == nil {
		s.err = err
	}
	return n, err
}

// rawStdout is the stdout main was given, for run's command to write to
// directly.
func (a *app) rawStdout() io.Writer {
	if s, ok := a.stdout.(*stickyWriter); ok {
		return s.w
	}
	return a.stdout
}

// lockedWriter serialises writes: run's renewer and its main loop both
// report on stderr.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
