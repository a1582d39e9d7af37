package sim

import (
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
)

// counterCheck follows the counter key, which only Incr and buffered
// increments touch, and bounds the value it must have at the end: every
// increment acknowledged and made durable, or acknowledged since the last
// power loss, counts; nothing counts that was never attempted. Inside the
// documented loss windows (NORMAL commits a power loss took back, buffered
// increments a crash lost) increments may be missing, nowhere else.
type counterCheck struct {
	durable   int64 // acknowledged, and a durable commit followed
	volatile  int64 // acknowledged since the last durable commit
	attempted int64 // every increment that may have applied
	lost      int64 // buffered, then lost with their process
	final     int64 // the value read at the end
	read      bool  // final was read
}

// observe follows one recorded op.
func (c *counterCheck) observe(op linearizability.Op) {
	if op.Event != linearizability.Verb {
		return
	}
	add := func(in model.Input, out model.Output) {
		if in.Kind != model.IncrBy || in.Key != hitsKey {
			return
		}
		c.attempted += in.Delta
		if !op.Unknown && out.Err == model.ErrNone {
			c.volatile += in.Delta
		}
	}
	switch op.Input.Kind {
	case model.IncrBy:
		add(op.Input, op.Output)
	case model.Flush:
		for i, sub := range op.Input.Ops {
			var out model.Output
			if i < len(op.Output.Sub) {
				out = op.Output.Sub[i]
			}
			add(sub, out)
		}
	}
	if !op.Unknown && op.Durability == linearizability.Full {
		c.durable += c.volatile
		c.volatile = 0
	}
}

// powerLost forgets acknowledged increments no durable commit followed.
func (c *counterCheck) powerLost() { c.volatile = 0 }

// lostBuffered notes the buffered increments of a process that died.
func (c *counterCheck) lostBuffered(buffered map[string]int64) { c.lost += buffered[hitsKey] }

// check compares the final value with the bounds.
func (c *counterCheck) check(w *world) {
	if !c.read {
		w.violate(CheckCounter, "the counter %q was not read at the end", hitsKey)
		return
	}
	lo, hi := c.durable+c.volatile, c.attempted
	if c.final < lo || c.final > hi {
		w.violate(CheckCounter, "%q ended at %d; want %d..%d (%d acknowledged and durable, %d acknowledged since the last power loss, %d attempted; %d buffered increments lost with their process)",
			hitsKey, c.final, lo, hi, c.durable, c.volatile, c.attempted, c.lost)
	}
}
