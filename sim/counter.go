package sim

import (
	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
)

// counterCheck follows the counter key, which only Incr and buffered
// increments touch, and bounds the value it must have at the end with
// checks.Counter: every increment acknowledged and made durable, or
// acknowledged since the last power loss, counts; nothing counts that was
// never attempted. Inside the documented loss windows (NORMAL commits a
// power loss took back, buffered increments a crash lost) increments may
// be missing, nowhere else.
type counterCheck struct {
	lost  int64 // buffered, then lost with their process (for the report)
	final int64 // the value read at the end
	read  bool  // final was read
}

// lostBuffered notes the buffered increments of a process that died.
func (c *counterCheck) lostBuffered(buffered map[string]int64) { c.lost += buffered[hitsKey] }

// check compares the final value with the bounds the history sets.
func (c *counterCheck) check(w *world) {
	if !c.read {
		w.violate(CheckCounter, "the counter %q was not read at the end", hitsKey)
		return
	}
	// Reads of the key (the verifier's, statectl's) change nothing: the
	// bounds are over what writes it.
	var writes []linearizability.Op
	for _, op := range w.history {
		if k := op.Input.Kind; op.Event == linearizability.Verb && (k == model.Get || k == model.TTL || k == model.Scan || k == model.Leases) {
			continue
		}
		writes = append(writes, op)
	}
	for _, v := range checks.Counter(writes, hitsKey, c.final) {
		w.violate(CheckCounter, "%s (%d buffered increments lost with their process)", v.Detail, c.lost)
	}
}
