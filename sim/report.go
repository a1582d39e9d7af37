package sim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/linearizability"
)

// The checks, as Violation.Check names them.
const (
	CheckLinearizability = "linearizability" // package linearizability over the history, with the durability model
	CheckFencing         = "fencing"         // tokens unique and increasing per lease; the resource never went back
	CheckClock           = "clock"           // engine time vs true time and the high-water mark
	CheckIntegrity       = "integrity"       // integrity_check and the invariants after every recovery
	CheckCounter         = "counter"         // the counter exact outside the loss windows
	CheckBuffered        = "buffered"        // each flush takes exactly what was buffered since the last
	CheckInfo            = checks.KindInfo   // statectl info's counts (DB.Stats) are the rows'
	CheckSweepCount      = "sweep-count"     // Sweep returns how many keys its statements deleted
	CheckEngineError     = "engine-error"    // an error no injected fault explains
	CheckProgress        = "progress"        // the run could go on, and the file opens at the end
	CheckPanic           = "panic"           // the engine (or the simulator) panicked
)

// ErrNoHTML is returned by Report.WriteHTML when the run has no failing
// linearizability partition to show.
var ErrNoHTML = errors.New("sim: no failing partition to visualise")

// Violation is one broken promise.
type Violation struct {
	// Check names the check that failed, one of the Check constants.
	Check string
	// Detail says what broke, with the operations that matter.
	Detail string
}

// String returns "check: detail".
func (v Violation) String() string { return v.Check + ": " + v.Detail }

// Report is what one run did and found.
type Report struct {
	// Config is the run's configuration.
	Config Config
	// Stats counts what the run did.
	Stats Stats
	// Trace is the hash of everything that happened, in hex: the same
	// Config gives the same Trace.
	Trace string
	// Violations are the broken promises, in the order found; none when
	// every check held.
	Violations []Violation
	// History is the recorded history the linearizability check ran on.
	History []linearizability.Op
	// Linearizability is that check's result.
	Linearizability linearizability.Result
}

// OK reports whether every check held.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// Checks returns the names of the checks that failed, sorted, without
// repeats.
func (r *Report) Checks() []string {
	set := map[string]bool{}
	for _, v := range r.Violations {
		set[v.Check] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// WriteHTML writes porcupine's view of the failing partition to path. It
// returns ErrNoHTML unless the linearizability check failed, and the error
// of writing the file otherwise.
func (r *Report) WriteHTML(path string) error {
	err := r.Linearizability.WriteHTML(path)
	if errors.Is(err, linearizability.ErrNoFailure) {
		return ErrNoHTML
	}
	return err
}

// Summary describes the run in one line, such as
// `seed 7: ok, 400 ops, 4 processes, 12 faults, 61s virtual, trace: 1f2e...`,
// each count in the singular for one (`1 process`).
func (r *Report) Summary() string {
	verdict := "ok"
	if !r.OK() {
		verdict = "FAILED " + strings.Join(r.Checks(), ",")
	}
	faults := 0
	for _, n := range r.Stats.Faults {
		faults += n
	}
	return fmt.Sprintf("seed %d: %s, %s, %s, %s, %d unknown, %.1fs virtual, trace: %s",
		r.Config.Seed, verdict, count(r.Stats.Ops, "op", "ops"), count(r.Stats.Procs, "process", "processes"),
		count(faults, "fault", "faults"), r.Stats.Unknown, float64(r.Stats.VirtualMillis)/1000, r.Trace)
}

// count is n and the noun for n of them, one or many: "1 process",
// "2 processes".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// report runs the checks that need the whole run, when it is complete,
// and builds the Report.
func (w *world) report(complete bool) *Report {
	if complete {
		w.checkLinearizability()
		w.checkFencing()
		w.counter.check(w)
		w.checkRecipes()
		w.checkAudits()
	}
	w.stats.Recorded = len(w.history)
	w.stats.VirtualMillis = w.trueMillis
	w.stats.Steps = w.sched.steps
	w.stats.Overlapping = overlapping(w.history)
	w.stats.Disk = w.m.Stats()
	return &Report{
		Config:          w.cfg,
		Stats:           w.stats,
		Trace:           w.traceHash(),
		Violations:      w.violations,
		History:         w.history,
		Linearizability: w.lin,
	}
}

// checkLinearizability runs package linearizability over the history.
func (w *world) checkLinearizability() {
	res := linearizability.Check(w.history, w.cfg.CheckTimeout)
	w.lin = res
	switch {
	case res.Err != nil:
		w.violate(CheckLinearizability, "the simulator recorded a malformed history: %v", res.Err)
	case res.Verdict == linearizability.Illegal:
		w.violate(CheckLinearizability, "%s\n%s", res, res.Description)
	case res.Verdict == linearizability.Unknown:
		w.inconclusive(CheckLinearizability, "inconclusive: %s (raise -timeout, or lower the fault rates)", res)
	}
}

// overlapping counts the operations of history called before an earlier
// one returned (by call order): calls that ran concurrently.
func overlapping(history []linearizability.Op) int {
	var ops []linearizability.Op
	for _, op := range history {
		if op.Event == linearizability.Verb && !op.Unknown {
			ops = append(ops, op)
		}
	}
	slices.SortFunc(ops, func(a, b linearizability.Op) int { return cmp.Compare(a.Call, b.Call) })
	n, lastReturn := 0, int64(0)
	for _, op := range ops {
		if op.Call < lastReturn {
			n++
		}
		lastReturn = max(lastReturn, op.Return)
	}
	return n
}
