package sim_test

import (
	"strings"
	"testing"

	"github.com/statekit/statekit/sim"
)

// TestSummaryCountsInTheSingular reads a run of one process and one fault
// in the singular, and more in the plural.
func TestSummaryCountsInTheSingular(t *testing.T) {
	one := &sim.Report{Stats: sim.Stats{Procs: 1, Ops: 1, Faults: map[string]int{"crash": 1}}}
	if s := one.Summary(); !strings.Contains(s, ", 1 op, 1 process, 1 fault, ") {
		t.Errorf("summary of one: %s", s)
	}
	two := &sim.Report{Stats: sim.Stats{Procs: 2, Ops: 2, Faults: map[string]int{"crash": 1, "pause": 1}}}
	if s := two.Summary(); !strings.Contains(s, ", 2 ops, 2 processes, 2 faults, ") {
		t.Errorf("summary of two: %s", s)
	}
}
