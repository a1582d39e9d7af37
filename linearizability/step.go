package linearizability

import (
	"fmt"
	"slices"

	"github.com/statekit/statekit/model"
)

// step is one Op projected into one partition: the porcupine input.
type step struct {
	index     int // of the Op in the history
	event     Event
	in        model.Input  // touches only the partition's key
	want      model.Output // the recorded answer, projected
	check     bool         // compare the answer at all
	subCheck  []bool       // Update: which sub-answers to compare; nil = all
	only      string       // Scan in a group: compare the rows of this key alone
	unknown   bool         // any answer; may or may not have taken effect
	nowLatest int64        // unknown: the latest engine time it may have run at (0: in.NowMillis)
	full      bool         // committed with FULL (for unknown outcomes)
	durable   bool         // a durable point when it matches
	final     bool         // called after the last power loss: no loss can roll it back
	survived  bool         // a PowerLoss the processes lived through (Op.Survived)
	client    int
	call, ret int64
	fullOf    int // Durable events made from a FULL commit: its index, else -1
	// era is the index, among the history's power losses in time order, of
	// the one that ends the step's era: the first after its call, or, for
	// a PowerLoss, itself; -1 after the last.
	era int
	// target is the partition's row as the file recovered after that
	// power loss (Op.Recovered), when it was read; nil: not read.
	target *cell
}

// matches reports whether out, the spec's answer, agrees with the recorded
// answer on what this projection can check.
func (st *step) matches(out model.Output) bool {
	if !st.check {
		return true
	}
	if st.only != "" {
		out.Rows = slices.DeleteFunc(slices.Clone(out.Rows), func(r model.KeyRow) bool { return r.Key != st.only })
	}
	if st.subCheck == nil {
		return model.Matches(st.in, out, st.want)
	}
	if out.Err != st.want.Err || len(out.Sub) != len(st.want.Sub) {
		return false
	}
	for i, sub := range out.Sub {
		if st.subCheck[i] && !model.Matches(st.in.Ops[i], sub, st.want.Sub[i]) {
			return false
		}
	}
	return true
}

// String describes the step readably, with its history index.
func (st *step) String() string {
	switch st.event {
	case PowerLoss:
		if st.survived {
			return fmt.Sprintf("#%d power loss at %d, survived", st.index, st.call)
		}
		return fmt.Sprintf("#%d power loss at %d", st.index, st.call)
	case Durable:
		if st.fullOf >= 0 {
			return fmt.Sprintf("#%d durable point (FULL commit of #%d) within [%d,%d]", st.index, st.fullOf, st.call, st.ret)
		}
		return fmt.Sprintf("#%d durable point within [%d,%d]", st.index, st.call, st.ret)
	}
	var s string
	switch {
	case st.unknown:
		s = fmt.Sprintf("#%d c%d [%d,?] %s -> unknown", st.index, st.client, st.call, st.in)
	case !st.check:
		s = fmt.Sprintf("#%d c%d [%d,%d] %s -> (not checked here)", st.index, st.client, st.call, st.ret, st.in)
	default:
		s = fmt.Sprintf("#%d c%d [%d,%d] %s", st.index, st.client, st.call, st.ret, model.Describe(st.in, st.want))
	}
	if st.only != "" {
		s += fmt.Sprintf(" (the rows of %q)", st.only)
	}
	if st.full {
		s += " full"
	}
	return s
}
