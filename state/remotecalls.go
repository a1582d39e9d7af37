package state

import "sync"

// remoteCalls counts the calls in flight on a remote store, so that Close
// waits for them before it closes the client, as a file's Close waits for
// the verb that holds the handle: a call that sent its command gets the
// store's answer, not a connection cut under it by Close. A call that
// starts once Close has begun is refused with ErrClosed, a call made from
// inside another's callback (a verb in a Scan's) too, so that it cannot
// hold Close for ever. Scan and Leases are not counted (remoteList): their
// callbacks may call Close.
type remoteCalls struct {
	mu     sync.Mutex
	idle   sync.Cond // signalled when n drops to 0
	n      int       // calls in flight
	closed bool      // Close has begun
}

// enter counts a call in, or reports false once Close has begun.
func (c *remoteCalls) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.n++
	return true
}

// leave counts a call out.
func (c *remoteCalls) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.n == 0 && c.idle.L != nil {
		c.idle.Broadcast()
	}
}

// begun reports whether Close has begun.
func (c *remoteCalls) begun() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// close refuses every later call and waits until none is in flight.
func (c *remoteCalls) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.idle.L = &c.mu
	for c.n > 0 {
		c.idle.Wait()
	}
}
