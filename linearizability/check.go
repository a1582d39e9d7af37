package linearizability

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/statekit/statekit/model"
)

// Verdict is the outcome of a check.
type Verdict string

// The verdicts.
const (
	// Ok: every partition is linearizable.
	Ok Verdict = "Ok"
	// Illegal: some partition is not linearizable (or an operation was
	// refused as invalid although the spec accepts it).
	Illegal Verdict = "Illegal"
	// Unknown: a partition's check ran out of time, or the history is
	// malformed (Result.Err says how).
	Unknown Verdict = "Unknown"
)

// ErrNoFailure is returned by Result.WriteHTML when there is no failing
// partition to show.
var ErrNoFailure = errors.New("linearizability: no failing partition to visualise")

// Result is what Check found.
type Result struct {
	// Verdict is Ok, Illegal or Unknown.
	Verdict Verdict
	// Partition names the first failing partition in sorted order ("g:"+tag
	// for keys with a hash tag, "k:"+key or "l:"+name) when Illegal, or the
	// first that timed out when Unknown and none failed. Empty otherwise,
	// and for a history found Illegal before any search (an op answered
	// ErrInvalid that the spec does not refuse, an out-of-order scan).
	Partition string
	// Description explains an Illegal or Unknown verdict: the longest
	// linearizable prefix of the failing partition, the states it leaves,
	// and the operations none of which can come next, with what the spec
	// answers instead.
	Description string
	// Err is set when the history is malformed (see Validate).
	Err error
	// Partitions and Operations count the partitions checked and the ops of
	// the history.
	Partitions, Operations int
	// Slowest is the longest one partition's search took, in wall-clock
	// time, and SlowestPartition that partition: the time limit applies to
	// each partition, so this is how close a run came to an inconclusive
	// verdict. It never changes a verdict.
	Slowest          time.Duration
	SlowestPartition string
	// Unchecked counts the partitions CheckBy's deadline left unchecked,
	// the one it cut included.
	Unchecked int

	model porcupine.Model
	info  *porcupine.LinearizationInfo
}

// Ok reports whether the verdict is Ok.
func (r Result) Ok() bool { return r.Verdict == Ok }

// String summarises the result in one line, such as
// `Illegal in partition k:a (12 partitions, 340 operations)`.
func (r Result) String() string {
	switch {
	case r.Err != nil:
		return fmt.Sprintf("%s: %v", r.Verdict, r.Err)
	case r.Partition != "":
		return fmt.Sprintf("%s in partition %s (%d partitions, %d operations)", r.Verdict, r.Partition, r.Partitions, r.Operations)
	}
	return fmt.Sprintf("%s (%d partitions, %d operations)", r.Verdict, r.Partitions, r.Operations)
}

// WriteHTML writes porcupine's interactive view of the failing partition to
// path. It returns ErrNoFailure unless the verdict is Illegal with a
// partition, and the error of writing the file otherwise.
func (r Result) WriteHTML(path string) error {
	if r.info == nil {
		return ErrNoFailure
	}
	if err := porcupine.VisualizePath(r.model, *r.info, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Check checks history against package model, partition by partition in
// sorted order, stopping at the first that is not linearizable. timeout
// bounds each partition's search (0: no limit); a partition that runs out
// makes the verdict Unknown unless a later one is Illegal. Check is
// deterministic when no partition runs out of time.
//
// Operations answered model.ErrInvalid changed nothing and are left out,
// after checking that the spec refuses them too: one the spec does not
// refuse makes the verdict Illegal before any partition is searched, so
// Partition is empty (an Update refused for one
// of its sub-inputs is checked against the model instead: whether that
// sub-input is reached depends on the state); so are calls whose answer a
// crash or power loss hid that the spec refuses in every state
// (model.Refuses), and reads (Get, TTL, Scan, Leases, an Update that only reads or
// aborts) whose answer was lost. A Kind that is no verb (the zero Kind
// included) is a malformed history, not an invalid op (Validate).
func Check(history []Op, timeout time.Duration) Result {
	return check(history, timeout, true)
}

// CheckBy is Check with a deadline for the whole check besides timeout for
// each partition: no partition's search runs past deadline, and none
// starts after it. A check the deadline cut short is Unknown (unless a
// partition before was Illegal), Partition naming the first partition it
// left unchecked and Unchecked counting them, the one it cut included.
func CheckBy(history []Op, timeout time.Duration, deadline time.Time) Result {
	return checkBy(history, timeout, deadline, true)
}

// check is Check; dropUnknownReads false keeps the reads whose answer was
// lost, for tests that compare the verdicts.
func check(history []Op, timeout time.Duration, dropUnknownReads bool) Result {
	return checkBy(history, timeout, time.Time{}, dropUnknownReads)
}

// checkBy is CheckBy, with no deadline when it is zero.
func checkBy(history []Op, timeout time.Duration, deadline time.Time, dropUnknownReads bool) Result {
	pr, res, ok := prepare(history, dropUnknownReads)
	if !ok {
		return res
	}
	res.Partitions = len(pr.names)
	for i, name := range pr.names {
		p, ops := pr.parts[name], pr.ops[name]
		m := newSetModel(p)
		limit := timeout
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return res.cutAt(pr.names[i:], len(pr.names))
			}
			if limit <= 0 || left < limit {
				limit = left
			}
		}
		began := time.Now()
		found := search(m, ops, limit)
		if took := time.Since(began); took > res.Slowest {
			res.Slowest, res.SlowestPartition = took, name
		}
		switch found {
		case linearizable:
			continue
		case outOfTime:
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				return res.cutAt(pr.names[i:], len(pr.names))
			}
			if res.Verdict == Ok {
				res.Verdict, res.Partition = Unknown, name
				res.Description = fmt.Sprintf("partition %s: the check ran out of time (%d operations)", name, len(ops))
			}
			continue
		}
		// Porcupine searches again for what it shows of the failure: the
		// longest linearizable prefixes and its interactive view.
		m.deadline = time.Time{} // porcupine keeps its own time
		pm := porcupineModel(m)
		verdict, info := porcupine.CheckOperationsVerbose(pm, ops, timeout)
		if verdict == porcupine.Ok {
			res.Verdict, res.Partition = Unknown, name
			res.Description = fmt.Sprintf("partition %s: the search found no linearization and porcupine found one: a bug in the checker (%d operations)", name, len(ops))
			return res
		}
		res.Verdict, res.Partition, res.model, res.info = Illegal, name, pm, &info
		res.Description = describeFailure(p, ops, info)
		return res
	}
	return res
}

// cutAt returns res for a check whose deadline passed with the partitions
// left (of all) unchecked.
func (res Result) cutAt(left []string, all int) Result {
	res.Unchecked = len(left)
	if res.Verdict == Ok {
		res.Verdict, res.Partition = Unknown, left[0]
		res.Description = fmt.Sprintf("the check's deadline passed with %d of %d partitions unchecked, from %s", len(left), all, left[0])
	}
	return res
}

// prepare validates history, checks the answers it refused as invalid, and
// splits the rest into partitions. It returns false with the verdict when
// that already decides it.
func prepare(history []Op, dropUnknownReads bool) (projection, Result, bool) {
	res := Result{Verdict: Ok, Operations: len(history)}
	if err := Validate(history); err != nil {
		res.Verdict, res.Err = Unknown, err
		return projection{}, res, false
	}
	refused := map[int]bool{}
	for i, op := range history {
		if op.Event != Verb || op.Unknown || op.Output.Err != model.ErrInvalid {
			continue
		}
		if op.Input.Kind == model.Update && !model.Refuses(op.Input) {
			// A sub-input the spec refuses, reached or not depending on
			// the state (an earlier one may abort first): the model
			// checks this answer like any other.
			continue
		}
		if _, out := model.Step(model.NewState(), op.Input); out.Err != model.ErrInvalid {
			res.Verdict = Illegal
			res.Description = fmt.Sprintf("#%d %s: refused as invalid, but the spec answers %s", i, op, out)
			return projection{}, res, false
		}
		refused[i] = true
	}
	for i, op := range history {
		if op.Event != Verb || op.Unknown {
			continue
		}
		if at, ok := inOrder(op.Output); !ok {
			res.Verdict = Illegal
			res.Description = fmt.Sprintf("#%d %s: row %d is not after the one before in byte order", i, op, at)
			return projection{}, res, false
		}
		if op.Input.Kind == model.Del && len(op.Input.Keys) == 0 && !refused[i] {
			// It touches no partition, and its answer is the same in
			// every state.
			if _, out := model.Step(model.NewState(), op.Input); !model.Matches(op.Input, out, op.Output) {
				res.Verdict = Illegal
				res.Description = fmt.Sprintf("#%d %s: a del of no keys, but the spec answers %s", i, op, out)
				return projection{}, res, false
			}
		}
	}
	for i, op := range history {
		if op.Event == Verb && op.Unknown && model.Refuses(op.Input) {
			// The spec refuses it in every state: whatever answer was
			// lost, it changed nothing. Left in, a Del refused for one
			// of its keys could delete the others.
			refused[i] = true
		}
		if dropUnknownReads && op.Event == Verb && op.Unknown && pureRead(op.Input) {
			// A read whose answer was lost changed nothing and is checked
			// against nothing: it fits anywhere in its interval, whatever
			// the others did. Left in, each one pending would double
			// porcupine's search (linearized yet, or not) for nothing.
			refused[i] = true
		}
	}
	ends, err := claimBounds(history)
	if err != nil {
		res.Verdict, res.Description = Illegal, err.Error()
		return projection{}, res, false
	}
	return project(history, refused, ends), res, true
}

// pureRead reports whether the call in never changes the model's state:
// Get, TTL, Scan and Leases only read it, and an Update that aborts, or whose verbs all
// only read, leaves it as it was.
func pureRead(in model.Input) bool {
	switch in.Kind {
	case model.Get, model.TTL, model.Scan, model.Leases:
		return true
	case model.Update:
		return in.Abort || !slices.ContainsFunc(in.Ops, func(sub model.Input) bool { return !pureRead(sub) })
	}
	return false
}

// inOrder reports whether a listing's rows (a Scan's keys, a Leases'
// names) each come after the one before in byte order, which no check of
// one partition can see; if not, it returns the index of the first that
// does not.
func inOrder(out model.Output) (int, bool) {
	for i := 1; i < len(out.Rows); i++ {
		if out.Rows[i].Key <= out.Rows[i-1].Key {
			return i, false
		}
	}
	for i := 1; i < len(out.Leases); i++ {
		if out.Leases[i].Name <= out.Leases[i-1].Name {
			return i, false
		}
	}
	return 0, true
}
