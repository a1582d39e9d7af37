package sim

import (
	"github.com/statekit/statekit/state"
)

// clockCheck holds the engine's time promises to the clocks it was given
// (DESIGN.md, Time): while a process runs its engine time moves with true
// time, whatever the wall clock does; it never goes back within a process;
// at open it is the larger of the wall clock and the file's high-water
// mark, which covers every time calls have used, except what a power loss
// took back since the last durable commit.
type clockCheck struct {
	attempted int64 // the latest engine time any call was made at
	completed int64 // the latest engine time of a call that completed
	durable   int64 // completed, as of the last durable (FULL) commit
}

// used checks the engine time now that p's next call will use.
func (c *clockCheck) used(w *world, p *process, now int64) {
	if drift := now - w.trueMillis - p.offset; drift != 0 {
		w.violate(CheckClock, "p%d's engine time moved %+dms against true time while it ran (now %d)", p.pid, drift, now)
		p.offset += drift
	}
	if now < p.lastNow {
		w.violate(CheckClock, "p%d's engine time went back from %d to %d", p.pid, p.lastNow, now)
	}
	p.lastNow = now
	c.attempted = max(c.attempted, now)
}

// done notes a call that completed at engine time now; full says it
// was a durable commit.
func (c *clockCheck) done(now int64, full bool) {
	c.completed = max(c.completed, now)
	if full {
		c.durable = c.completed
	}
}

// powerLost forgets what the power loss may have taken back.
func (c *clockCheck) powerLost() { c.completed = c.durable }

// opened checks p's engine time at open.
func (c *clockCheck) opened(w *world, p *process, now int64) {
	wall := w.wallMillis()
	lead := state.HighWaterLead.Milliseconds()
	switch {
	case now < c.completed:
		w.violate(CheckClock, "p%d opened at engine time %d, %dms before time %d that completed calls had used (wall %d): "+
			"time went back across a restart, the high-water mark was not honoured", p.pid, now, c.completed-now, c.completed, wall)
	case now < wall:
		w.violate(CheckClock, "p%d opened at engine time %d, behind the wall clock %d", p.pid, now, wall)
	case now > max(wall, c.attempted+lead):
		w.violate(CheckClock, "p%d opened at engine time %d, beyond both the wall clock %d and the latest time used %d plus the high-water lead",
			p.pid, now, wall, c.attempted)
	}
}
