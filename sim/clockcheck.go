package sim

import (
	"math"

	"github.com/statekit/statekit/state"
)

// clockCheck holds the engine's time promises to the clocks it was given:
// while a process runs its engine time moves with true
// time, whatever the wall clock does; it never goes back within a process;
// at open it is the larger of the wall clock and the file's high-water
// mark, which covers every time calls have used, except what a power loss
// took back since the last durable commit.
type clockCheck struct {
	attempted int64      // the latest engine time any call was made at, or any open read
	completed int64      // the latest engine time of a call that completed
	durable   int64      // the latest engine time a durable (FULL) commit covers
	recent    []doneCall // completed calls a later FULL commit may not cover yet
	lost      []int64    // durable at each power loss (or dropped sync) so far, in order
	// unmarked are the spans of events from a failed sync that dropped
	// writes to a handle's finding them, when it marks the shared index
	// for rebuilding, or to the end of the process whose sync failed (it
	// looks before its failing call returns); the last one's end is
	// math.MaxInt64 while neither has come.
	unmarked []span
}

// span is a stretch of events, both ends included, opened by process pid.
type span struct {
	from, to int64
	pid      int
}

// openStart is what the clock check knew when an open began: the latest
// time completed calls had used, how many losses had happened, and the
// event it began after.
type openStart struct {
	completed int64
	losses    int
	at        int64
}

// opening returns what an open beginning after event at must start at or
// after.
func (c *clockCheck) opening(at int64) openStart { return openStart{c.completed, len(c.lost), at} }

// completedBefore is the latest time calls completed before the open that
// began at s, and read the mark by event now, had used, less what a loss
// since took back: a failed sync that dropped the WAL's writes (as
// reported of XFS) leaves an open under way running, and the open then
// reads the file as the loss left it, as an open after a power loss does.
// What the first such loss took back is forgotten for it, as powerLost
// forgets it for every later open. An open that ran while a failed sync's
// dropped writes were unmarked has no bound: every connection trusts the
// shared index until the failing handle marks it, and reads through it
// what the failure took back, frames of a WAL since started over or pages
// a checkpoint had copied, older than any durable commit (CORRECTNESS.md:
// the window before the mark is not promised). math.MinInt64 says so.
func (c *clockCheck) completedBefore(s openStart, now int64) int64 {
	for _, u := range c.unmarked {
		if u.from <= now && s.at <= u.to {
			return math.MinInt64
		}
	}
	if len(c.lost) == s.losses {
		return s.completed
	}
	return min(s.completed, c.lost[s.losses])
}

// dropped notes a failed sync of process pid that dropped writes at event
// at: reads may see what it took back until a handle marks the index
// (marked) or pid ends (ended).
func (c *clockCheck) dropped(at int64, pid int) {
	if c.unmarkedNow() {
		return // still unmarked since an earlier one
	}
	c.unmarked = append(c.unmarked, span{at, math.MaxInt64, pid})
}

// ended notes that process pid stopped or died at event at: a failed sync
// of its own was looked at, and the index marked if anything was lost,
// before the call that met it returned.
func (c *clockCheck) ended(at int64, pid int) {
	if n := len(c.unmarked); n > 0 && c.unmarked[n-1].to == math.MaxInt64 && c.unmarked[n-1].pid == pid {
		c.unmarked[n-1].to = at
	}
}

// unmarkedNow reports whether writes a failed sync dropped are still not
// found: reads now may see what it took back.
func (c *clockCheck) unmarkedNow() bool {
	n := len(c.unmarked)
	return n > 0 && c.unmarked[n-1].to == math.MaxInt64
}

// marked notes that, at event at, a handle found what failed syncs took
// back and marked the shared index for rebuilding, or a power loss ended
// every reader of the old index.
func (c *clockCheck) marked(at int64) {
	if n := len(c.unmarked); n > 0 && c.unmarked[n-1].to == math.MaxInt64 {
		c.unmarked[n-1].to = at
	}
}

// doneCall is a call that completed: its engine time, and when it returned
// (the event counter).
type doneCall struct{ now, ret int64 }

// claim is an engine time claimed at a true time.
type claim struct{ now, trueMillis int64 }

// claimed checks the engine time now that p claimed for a call or for
// background work. Claims made before the open task learned p's offset
// (its background goroutines may run first) wait for it.
func (c *clockCheck) claimed(w *world, p *process, now int64) {
	if !p.timed {
		p.early = append(p.early, claim{now, w.trueMillis})
		return
	}
	c.used(w, p, now, w.trueMillis)
}

// nowRead checks an answer of p's DB.Now, read at the current true time:
// it must be p's engine time then (the same offset from true time as every
// time p claims), so never behind a time p used. Reads before p's offset
// is known are the open task's own, which sets it.
func (c *clockCheck) nowRead(w *world, p *process, now int64) {
	if !p.timed {
		return
	}
	w.stats.NowReads++
	if drift := now - w.trueMillis - p.offset; drift != 0 {
		w.violate(CheckClock, "p%d's DB.Now answered %d, %+dms off its engine time %d", p.pid, now, drift, w.trueMillis+p.offset)
	}
	if now < p.lastNow {
		w.violate(CheckClock, "p%d's DB.Now answered %d, behind the time %d it used", p.pid, now, p.lastNow)
	}
}

// started checks the engine time now that p's open task read at the
// current true time, once p's offset is set from it: first the claims its
// background goroutines made before (they ran during Open, earlier in
// true time), in the order they made them, then now. Checked the other
// way round, a background claim made a few milliseconds before the open
// task read the time looked like time going back.
//
// The time an open read is a time used, as a call's is: the handle hands it
// out (Now) and keeps it in the high-water mark, so a later open may start
// there even when the process made no call before it closed.
func (c *clockCheck) started(w *world, p *process, now int64) {
	p.lastNow = math.MinInt64
	c.timed(w, p)
	if now < p.lastNow {
		w.violate(CheckClock, "p%d's engine time went back from %d to %d", p.pid, p.lastNow, now)
	}
	p.lastNow = now
	c.usedBy(p, now)
}

// usedBy notes that p used engine time now. A read-only handle's times
// (the inspector's) are checked as any process's while it runs and at its
// open, but are not ones a later open must start after: a read-only handle
// writes no high-water mark, so after the wall clock stepped forward and
// back an open may start before a time it used (CORRECTNESS.md, Time).
func (c *clockCheck) usedBy(p *process, now int64) {
	if !p.readOnly {
		c.attempted = max(c.attempted, now)
	}
}

// timed notes that p's offset is known, and checks the claims that waited
// for it.
func (c *clockCheck) timed(w *world, p *process) {
	p.timed = true
	for _, cl := range p.early {
		c.used(w, p, cl.now, cl.trueMillis)
	}
	p.early = nil
}

// used checks the engine time now that p used at true time at.
func (c *clockCheck) used(w *world, p *process, now, at int64) {
	if drift := now - at - p.offset; drift != 0 {
		w.violate(CheckClock, "p%d's engine time moved %+dms against true time while it ran (now %d)", p.pid, drift, now)
		p.offset += drift
	}
	if now < p.lastNow {
		w.violate(CheckClock, "p%d's engine time went back from %d to %d", p.pid, p.lastNow, now)
	}
	p.lastNow = now
	c.usedBy(p, now)
}

// done notes a call that completed at engine time now, called and
// returned at events call and ret; full says it was a durable commit. A
// durable commit covers the times of the calls that returned before it was
// called (they committed before it, or read under a mark committed before
// it), not of those that ran beside it.
func (c *clockCheck) done(now, call, ret int64, full bool) {
	c.completed = max(c.completed, now)
	if !full {
		c.recent = append(c.recent, doneCall{now, ret})
		return
	}
	c.durable = max(c.durable, now)
	keep := c.recent[:0]
	for _, u := range c.recent {
		if u.ret < call {
			c.durable = max(c.durable, u.now)
		} else {
			keep = append(keep, u)
		}
	}
	c.recent = keep
}

// powerLost forgets what the power loss may have taken back.
func (c *clockCheck) powerLost() {
	c.completed, c.recent = c.durable, nil
	c.lost = append(c.lost, c.durable)
}

// opened checks p's engine time at open. now is p's engine time at true
// time now; clock is the clock p opened with, which kept the wall-clock
// reading the engine based its time on; completed is what completed
// calls had used when the open began, less what a loss took back while it
// ran (completedBefore; calls that completed while it ran, in other
// processes, may be behind what it read).
func (c *clockCheck) opened(w *world, p *process, now int64, clock *procClock, completed int64) {
	wall := clock.wallRead
	base := now - (w.trueMillis - clock.wallReadTrue) // the engine's time when it read the clock
	lead := state.HighWaterLead.Milliseconds()
	switch {
	case completed != math.MinInt64 && base < completed:
		w.violate(CheckClock, "p%d opened at engine time %d, %dms before time %d that completed calls had used (wall %d): "+
			"time went back across a restart, the high-water mark was not honoured", p.pid, base, completed-base, completed, wall)
	case base < wall:
		w.violate(CheckClock, "p%d opened at engine time %d, behind the wall clock %d", p.pid, base, wall)
	case base > max(wall, c.attempted+lead):
		w.violate(CheckClock, "p%d opened at engine time %d, beyond both the wall clock %d and the latest time used %d plus the high-water lead",
			p.pid, base, wall, c.attempted)
	}
}
