package stress

import (
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/state"
)

// stepClock is the operating system's clock with a monotonic reading that
// moves only when tick is called: between two ticks the engine's now stands
// still, so a call's now is the one of the tick before it (Config.StepClock).
type stepClock struct {
	start time.Time
	mono  atomic.Int64 // nanoseconds since start, as of the last tick
}

var _ state.Clock = (*stepClock)(nil)

func newStepClock() *stepClock { return &stepClock{start: time.Now()} }

// Wall returns the operating system's wall clock.
func (c *stepClock) Wall() time.Time { return time.Now().Round(0) }

// Monotonic returns the reading of the last tick.
func (c *stepClock) Monotonic() time.Duration { return time.Duration(c.mono.Load()) }

// tick moves the monotonic reading to the operating system's.
func (c *stepClock) tick() { c.mono.Store(int64(time.Since(c.start))) }
