package stress

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/statekit/statekit/internal/checks"
)

// Kinds of violation, for Violation.Kind.
const (
	// KindLinearizability: the check found no linearization of a
	// partition (or ran out of time on one).
	KindLinearizability = "linearizability"
	// KindDuplicateToken: one fencing token went to two owners, or the
	// fenced resource accepted one token from two holders.
	KindDuplicateToken = checks.KindDuplicateToken
	// KindTokenOrder: a grant that began after another returned got a
	// lower token, or the resource's accepted tokens went down.
	KindTokenOrder = checks.KindTokenOrder
	// KindFence: the resource accepted a write with a token its writer was
	// never seen to be granted.
	KindFence = checks.KindFence
	// KindCounter: a counter lost or invented an increment, or two
	// increments returned the same value.
	KindCounter = checks.KindCounter
	// KindBuffered: a worker's flushes took more buffered increments than
	// its callers buffered, or a clean close left some unwritten (or
	// began a flush it never ended).
	KindBuffered = checks.KindBuffered
	// KindClock: a worker's engine time did not move with CLOCK_MONOTONIC
	// while it ran, or started behind a time a finished call had used.
	KindClock = checks.KindClock
	// KindAtomicity: an audit of a transfer pair, both keys read in one
	// Update, did not find them summing to zero: an Update committed in
	// parts.
	KindAtomicity = checks.KindAtomicity
	// KindInfo: statectl info's counts (state.DB.Stats) at the end were
	// not the file's rows.
	KindInfo = checks.KindInfo
	// KindEngineError: a call failed with an error the model has no kind
	// for (an I/O error, ErrBusy after the long busy timeout, ...). No
	// fault is injected, so nothing explains it.
	KindEngineError = "engine-error"
	// KindIntegrity: the file failed state.DB.Check or the resource failed
	// integrity_check, or a file could not be read back.
	KindIntegrity = "integrity"
	// KindWorker: a worker failed to open the file, crashed, exited by
	// itself or did not stop, or exited cleanly with a call it began
	// unanswered.
	KindWorker = "worker"
	// KindCheckLimit: the linearizability check reached Config.CheckLimit
	// before it had checked every epoch: what it checked passed, the rest
	// is unknown.
	KindCheckLimit = "check-limit"
	// KindShortRun: the run stopped (at its time cap, its bound on calls,
	// or interrupted) before it had done the work Config.Until asked.
	KindShortRun = "short-run"
)

// Kinds returns every kind of violation a Report may hold.
func Kinds() []string {
	return []string{KindLinearizability, KindDuplicateToken, KindTokenOrder, KindFence, KindCounter, KindBuffered,
		KindClock, KindEngineError, KindIntegrity, KindWorker, KindShortRun, KindCheckLimit}
}

// maxViolationsPerKind bounds what a report lists of one kind; the rest
// are counted.
const maxViolationsPerKind = 10

// Violation is one broken promise.
type Violation struct {
	Kind   string // one of the Kind constants
	Detail string // what broke, in words
}

// Report is what a run did and found.
type Report struct {
	Seed       uint64 // of the workload and the kill schedule
	Bugs       string // the planted bugs, "" for none
	Dir        string // where the run's files are
	Processes  int    // workers at once
	Readers    int    // read-only workers at once, beside them
	Goroutines int    // clients calling at once in each worker
	StepClock  bool   // the workers ran on a stepped clock, without background work
	// Redis is the address of the Redis server the run attacked, "" for a
	// file; NoPersistence says the server ran with appendonly no.
	Redis         string
	NoPersistence bool
	ServerKills   int // SIGKILLs of the Redis server, each followed by a restart
	Started       int // worker processes started, restarts included
	Kills         int // SIGKILLs sent
	ReaderKills   int // those of them that killed a read-only worker
	// Elapsed is how long the attack lasted, stopping the workers included.
	Elapsed time.Duration
	// Stopped says why the attack stopped (one of the Stopped constants).
	Stopped string
	// Done is the work the run did, counted over the whole history, and
	// Wanted what Config.Until asked for.
	Done, Wanted Work

	Operations  int // ops recorded: calls, flushes, and sweep statements that deleted keys
	ReaderCalls int // those of them that read-only workers made
	// ReaderListings counts the reader calls that were listings (Scan of
	// the epoch's keys, Leases), as statectl dump and leases print them.
	ReaderListings int
	// Audits counts the audits of a transfer pair that answered: each
	// read both keys in one Update and was checked to sum to zero.
	Audits int
	Cut    int // calls a kill left unknown
	Failed int // calls that failed with an error the model does not know
	// Unavailable counts the calls and flushes a Redis server refused or
	// could not be reached for (not applied, left out of the history), and
	// Uncertain those whose reply was lost (kept as unknown outcomes).
	Unavailable, Uncertain int
	Flushes                int // flushes of buffered increments recorded
	Buffered               int // buffered increments made
	Sweeps                 int // recorded sweeps that deleted keys (Done.Swept says how many)
	Fenced                 int // writes the fenced resource accepted
	Refused                int // writes it refused for a stale token

	// LooseBound counts the unknown outcomes on Redis (lost replies, and
	// calls cut by a worker kill) last heard of after a server was
	// restarted past their call: the command may have reached the new
	// server, so the check bounds it by a later server's death or its
	// process's end, not by the kill of the server running at its call. The
	// more of them, the less sharp the check.
	LooseBound int

	// ClockSpread is how far apart the processes' engine clocks were: the
	// largest minus the smallest difference between a call's now and its
	// CLOCK_MONOTONIC call time.
	ClockSpread time.Duration
	// Linearizability is the linearizability verdict line, and CheckTime how long
	// it took.
	Linearizability string
	CheckTime       time.Duration
	// HTML names porcupine's view of a failing partition, when there is one.
	HTML string

	// Violations lists what broke, at most maxViolationsPerKind a kind;
	// Dropped counts the others.
	Violations []Violation
	Dropped    int

	// RedisPrefix is the prefix of every key a run against a server the
	// caller runs (Redis.URL) wrote, "" for another run. KeysRemoved counts
	// the keys under it the run deleted when it ended, and KeysLeft says
	// why some may be left ("" when none are).
	RedisPrefix string
	KeysRemoved int
	KeysLeft    string
}

// OK reports whether the run found no violation.
func (r *Report) OK() bool { return len(r.Violations) == 0 && r.Dropped == 0 }

// Has reports whether the run found a violation of kind.
func (r *Report) Has(kind string) bool {
	for _, v := range r.Violations {
		if v.Kind == kind {
			return true
		}
	}
	return false
}

// violate records a violation, once however often it is found.
func (r *Report) violate(kind, format string, args ...any) {
	v := Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)}
	n := 0
	for _, old := range r.Violations {
		if old == v {
			return
		}
		if old.Kind == kind {
			n++
		}
	}
	if n >= maxViolationsPerKind {
		r.Dropped++
		return
	}
	r.Violations = append(r.Violations, v)
}

// violations records each of vs.
func (r *Report) violations(vs []checks.Violation) {
	for _, v := range vs {
		r.violate(v.Kind, "%s", v.Detail)
	}
}

// Verdict is "PASS" or "FAIL".
func (r *Report) Verdict() string {
	if r.OK() {
		return "PASS"
	}
	return "FAIL"
}

// WriteTo prints the report to w: the figures, then each violation, then
// the verdict. It returns the bytes written and the error of writing.
func (r *Report) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	bugs := ""
	if r.Bugs != "" {
		bugs = ", planted bug " + r.Bugs
	}
	mode := "default options (real clock, background work)"
	switch {
	case r.Redis != "" && r.NoPersistence:
		mode = "redis at " + r.Redis + " with persistence off"
	case r.Redis != "":
		mode = "redis at " + r.Redis
	case r.StepClock:
		mode = "stepped clock, no background work"
	}
	fmt.Fprintf(&b, "stress: seed %d%s, %s, %s\n", r.Seed, bugs, mode, r.Dir)
	readers, readerKills, readerCalls := "", "", ""
	if r.Readers > 0 {
		readers = fmt.Sprintf(" and %d read-only", r.Readers)
		readerKills = fmt.Sprintf(" (%d read-only)", r.ReaderKills)
		readerCalls = fmt.Sprintf(", %d by read-only workers (%d listings)", r.ReaderCalls, r.ReaderListings)
	}
	fmt.Fprintf(&b, "processes:   %d at once%s of %d clients each, %d started, %d killed with SIGKILL%s, %v; stopped because %s\n",
		r.Processes, readers, r.Goroutines, r.Started, r.Kills, readerKills, r.Elapsed.Round(time.Millisecond), r.Stopped)
	if r.Redis != "" {
		fmt.Fprintf(&b, "server:      killed with SIGKILL and restarted %d times\n", r.ServerKills)
	}
	fmt.Fprintf(&b, "operations:  %d calls (%.0f/s)%s, %d audits of a transfer pair, %d cut by a kill, %d failed with an error\n",
		r.Operations, float64(r.Operations)/r.Elapsed.Seconds(), readerCalls, r.Audits, r.Cut, r.Failed)
	if r.Redis != "" {
		fmt.Fprintf(&b, "outages:     %d calls refused (not applied), %d lost their reply (unknown outcomes)\n", r.Unavailable, r.Uncertain)
		fmt.Fprintf(&b, "bounds:      %d unknown outcomes heard of only after a restart past their call, bounded by a later server's death or their process's end\n", r.LooseBound)
	}
	switch {
	case r.RedisPrefix != "" && r.KeysLeft != "":
		fmt.Fprintf(&b, "keys:        removed %d keys of the run (prefix %s); some may be left on the server: %s\n", r.KeysRemoved, r.RedisPrefix, r.KeysLeft)
	case r.RedisPrefix != "":
		fmt.Fprintf(&b, "keys:        removed the run's %d keys (prefix %s) from the server\n", r.KeysRemoved, r.RedisPrefix)
	}
	fmt.Fprintf(&b, "flushes:     %d buffered increments, %d flushes\n", r.Buffered, r.Flushes)
	sweeps := "sweep calls"
	if !r.StepClock {
		sweeps = "background and inline sweep statements"
	}
	if r.Redis == "" {
		fmt.Fprintf(&b, "sweeps:      %d %s deleted %d expired keys\n", r.Sweeps, sweeps, r.Done.Swept)
	}
	fmt.Fprintf(&b, "leases:      %d grants (%d contended), fenced resource accepted %d writes and refused %d stale tokens\n",
		r.Done.Grants, r.Done.Contended, r.Fenced, r.Refused)
	if !r.Wanted.IsZero() {
		fmt.Fprintf(&b, "work:        did %s; asked for %s\n", r.Done, r.Wanted.Asked())
	}
	fmt.Fprintf(&b, "clocks:      engine clocks of the processes spread over %v\n", r.ClockSpread)
	fmt.Fprintf(&b, "linearizable: %s, checked in %v\n", r.Linearizability, r.CheckTime.Round(time.Millisecond))
	if r.HTML != "" {
		fmt.Fprintf(&b, "failing partition: %s\n", r.HTML)
	}
	fmt.Fprintf(&b, "violations:  %d\n", len(r.Violations)+r.Dropped)
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s: %s\n", v.Kind, strings.ReplaceAll(strings.TrimSpace(v.Detail), "\n", "\n    "))
	}
	if r.Dropped > 0 {
		fmt.Fprintf(&b, "  ... and %d more\n", r.Dropped)
	}
	fmt.Fprintf(&b, "verdict:     %s\n", r.Verdict())
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}
