// Package sysclock is the production clock: the operating system's wall and
// monotonic clocks. It is the one place statekit reads real time, so the
// engine itself never calls time.Now.
package sysclock

import "time"

// Clock reads the operating system's clocks. Its zero value is not ready:
// use New.
type Clock struct{ start time.Time }

// New returns a Clock whose monotonic reading starts near zero now.
func New() *Clock { return &Clock{start: time.Now()} }

// Wall returns the wall clock, stripped of its monotonic reading.
func (c *Clock) Wall() time.Time { return time.Now().Round(0) }

// Monotonic returns the time elapsed since New, from the monotonic clock.
func (c *Clock) Monotonic() time.Duration { return time.Since(c.start) }

// Sleep waits d on a real timer, or until stop is closed, and reports
// whether d passed. A pause under a millisecond (the busy handler's first
// retries) sleeps on the thread (Precise), since a timer would wake it a
// millisecond or more late; stop is not watched for so short a pause.
func (c *Clock) Sleep(d time.Duration, stop <-chan struct{}) bool {
	if d < time.Millisecond {
		select {
		case <-stop:
			return false
		default:
		}
		Precise(d)
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// Real reports that this clock's readings are the machine's own: time
// that passes between two readings passed for every process.
func (c *Clock) Real() bool { return true }
