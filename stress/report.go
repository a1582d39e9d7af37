package stress

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Kinds of violation, for Violation.Kind.
const (
	// KindLinearizability: porcupine found no linearization of a
	// partition (or ran out of time on one).
	KindLinearizability = "linearizability"
	// KindDuplicateToken: one fencing token went to two owners, or the
	// fenced resource accepted one token from two holders.
	KindDuplicateToken = "duplicate-token"
	// KindTokenOrder: a grant that began after another returned got a
	// lower token, or the resource's accepted tokens went down.
	KindTokenOrder = "token-order"
	// KindFence: the resource accepted a write with a token its writer was
	// never seen to be granted.
	KindFence = "fence"
	// KindCounter: a counter lost or invented an increment, or two
	// increments returned the same value.
	KindCounter = "counter"
	// KindIntegrity: the file failed state.DB.Check or the resource failed
	// integrity_check, or a file could not be read back.
	KindIntegrity = "integrity"
	// KindWorker: a worker failed to open the file, crashed, exited by
	// itself or did not stop.
	KindWorker = "worker"
)

// maxViolationsPerKind bounds what a report lists of one kind; the rest
// are counted.
const maxViolationsPerKind = 10

// Violation is one broken promise.
type Violation struct {
	Kind   string // one of the Kind constants
	Detail string
}

// Report is what a run did and found.
type Report struct {
	Seed      uint64
	Bugs      string // the planted bugs, "" for none
	Dir       string // where the run's files are
	Processes int    // workers at once
	Started   int    // worker processes started, restarts included
	Kills     int    // SIGKILLs sent
	Elapsed   time.Duration

	Operations int // calls recorded
	Cut        int // calls a kill left unknown
	Failed     int // calls that failed with an error the model does not know
	Grants     int // lease grants with a known token
	Fenced     int // writes the fenced resource accepted
	Refused    int // writes it refused for a stale token

	// ClockSpread is how far apart the processes' engine clocks were: the
	// largest minus the smallest difference between a call's now and its
	// CLOCK_MONOTONIC call time.
	ClockSpread time.Duration
	// Linearizability is the porcupine verdict line, and CheckTime how long
	// it took.
	Linearizability string
	CheckTime       time.Duration
	// HTML names porcupine's view of a failing partition, when there is one.
	HTML string

	// Violations lists what broke, at most maxViolationsPerKind a kind;
	// Dropped counts the others.
	Violations []Violation
	Dropped    int
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
	fmt.Fprintf(&b, "stress: seed %d%s, %s\n", r.Seed, bugs, r.Dir)
	fmt.Fprintf(&b, "processes:   %d at once, %d started, %d killed with SIGKILL, %v\n",
		r.Processes, r.Started, r.Kills, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "operations:  %d calls (%.0f/s), %d cut by a kill, %d failed with an error\n",
		r.Operations, float64(r.Operations)/r.Elapsed.Seconds(), r.Cut, r.Failed)
	fmt.Fprintf(&b, "leases:      %d grants, fenced resource accepted %d writes and refused %d stale tokens\n",
		r.Grants, r.Fenced, r.Refused)
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
