package state

import (
	"sync/atomic"
	"time"
)

// Clock is where the engine reads time. The engine never calls time.Now:
// production uses the operating system's clocks, the simulator injects its
// own with WithClock.
type Clock interface {
	// Wall returns the wall clock. It may step back or forward.
	Wall() time.Time
	// Monotonic returns a reading that never goes back. It is meaningless
	// across restarts.
	Monotonic() time.Duration
}

// Sleeper is an optional interface a Clock may implement, as io.WriterTo is
// to io.Writer: the engine's background goroutines (the sweeper, the
// flusher) wait through it, so a simulated clock decides when they run.
// Without it they wait on the operating system's timers.
type Sleeper interface {
	// Sleep waits until d has passed on the clock's monotonic time, or
	// until stop is closed, and reports whether d passed.
	Sleep(d time.Duration, stop <-chan struct{}) bool
}

// hwmLeadMillis is how far ahead of the engine's time the high-water mark is
// written. The mark is rewritten only when the engine's time reaches it, so
// at most one extra write per lead, and the file always holds a mark at or
// after every time the engine has used. The cost: after a restart, time may
// resume up to this much later than the last time used, shortening live
// deadlines by at most that much.
const hwmLeadMillis = 500

// hwmLeadAheadMillis is the lead of a handle whose time started from a
// mark ahead of the wall clock: a process killed before closing leaves its
// mark up to a lead past the time it used, and the next one starts there.
// Processes killed again and again soon after they start would push time
// ahead a full lead each; a short lead while ahead keeps that creep small,
// for a mark write every 50 ms of use instead of 500.
const hwmLeadAheadMillis = 50

// engineTime turns the injected clock into the engine's time: the larger of
// the wall clock at open and the file's high-water mark, advanced by the
// monotonic clock since open. A wall step while running changes nothing.
//
// Its fields are set once, at open, before any other goroutine sees the
// handle, except lastMillis, which nowMillis moves under the handle's lock
// and peekMillis reads without it: DB.Now reads the time without waiting
// for a running commit (db.go).
type engineTime struct {
	clock      Clock
	baseMillis int64         // max(wall at open, high-water mark)
	ahead      bool          // the mark was ahead of the wall clock at open
	monoAtOpen time.Duration // clock.Monotonic() at open
	lastMillis atomic.Int64  // the latest time a verb used, never goes back
}

// newEngineTime starts the engine's time of a handle opening now.
func newEngineTime(c Clock, hwmMillis int64, ignoreHWM bool) *engineTime {
	base, ahead := c.Wall().UnixMilli(), false
	if hwmMillis > base && !ignoreHWM {
		base, ahead = hwmMillis, true
	}
	e := &engineTime{clock: c, baseMillis: base, ahead: ahead, monoAtOpen: c.Monotonic()}
	e.lastMillis.Store(base)
	return e
}

// leadMillis is how far ahead of the time used the handle writes its mark.
func (e *engineTime) leadMillis() int64 {
	if e.ahead {
		return hwmLeadAheadMillis
	}
	return hwmLeadMillis
}

// peekMillis returns the engine's time in unix milliseconds without
// recording it as used. It is never behind a time a verb used, even if an
// injected monotonic clock goes back. It is safe without the handle's
// lock: it reads the clock, then the latest time used, so a verb that
// claims a time after it returns claims one at or after it (the clock
// reads later, the latest time used only grows).
func (e *engineTime) peekMillis() int64 {
	elapsed := e.clock.Monotonic() - e.monoAtOpen
	return max(e.baseMillis+int64(elapsed/time.Millisecond), e.lastMillis.Load())
}

// nowMillis returns the engine's time and records it as used. Callers hold
// the handle's lock: it is the only writer of lastMillis.
func (e *engineTime) nowMillis() int64 {
	now := e.peekMillis()
	e.lastMillis.Store(now)
	return now
}

// usedMillis returns the latest time a verb used.
func (e *engineTime) usedMillis() int64 { return e.lastMillis.Load() }
