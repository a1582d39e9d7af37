package faults

import (
	"sync"
	"time"
)

// Clock is a simulated clock pair a test or the simulator steps by hand: a
// wall clock that can jump back or forward, and a monotonic clock that only
// moves with Advance. It satisfies state.Clock and is safe for concurrent use.
type Clock struct {
	mu   sync.Mutex
	wall time.Time
	mono time.Duration
}

// NewClock returns a Clock whose wall clock reads wall and whose monotonic
// clock reads zero.
func NewClock(wall time.Time) *Clock { return &Clock{wall: wall} }

// Wall returns the simulated wall clock.
func (c *Clock) Wall() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall
}

// Monotonic returns the simulated monotonic clock.
func (c *Clock) Monotonic() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

// Advance moves both clocks forward by d, as real time passing does. It
// panics if d is negative: time passing never goes back.
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic("faults.Clock.Advance: negative duration")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
	c.mono += d
}

// StepWall moves only the wall clock by d (back when d is negative), as an
// operator or NTP setting the clock does.
func (c *Clock) StepWall(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
}

// Restart returns a new Clock for a process started now: the same wall
// clock, a monotonic clock back at zero (it is meaningless across restarts).
func (c *Clock) Restart() *Clock {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &Clock{wall: c.wall}
}
