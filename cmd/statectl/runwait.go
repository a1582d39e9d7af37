package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/statekit/statekit/state"
)

// runBusyTimeout is how long each of run's verbs waits for the file's
// write lock, a third of the ttl and at most state.DefaultBusyTimeout: a
// renewal that waits longer is given up and retried at the next tick.
func runBusyTimeout(ttl time.Duration) time.Duration {
	return min(ttl/3, state.DefaultBusyTimeout)
}

// waiter is run's wait for the lease or the file, up to --wait.
type waiter struct {
	a        *app
	path     string
	o        runOptions
	sigs     <-chan os.Signal
	deadline time.Time // set by start
	said     bool      // the "waiting up to" line was printed
}

func newWaiter(a *app, path string, o runOptions, sigs <-chan os.Signal) *waiter {
	return &waiter{a: a, path: path, o: o, sigs: sigs}
}

// start begins the wait now, once: --wait counts from the first time run
// finds something to wait for, not from its own start, so the time it
// took to open the file (seconds on a loaded machine) is not taken out of
// it, and a run that waits for another owner always says so first.
// Watching a lease of run's own owner is part of the wait.
func (w *waiter) start() { w.startAt(time.Now()) }

// startAt begins the wait at t, once: a try that found the file busy began
// the wait when it began, since it waited for the lock from then.
func (w *waiter) startAt(t time.Time) {
	if w.deadline.IsZero() {
		w.deadline = t.Add(w.o.wait)
	}
}

// minTry is the least time a try for the lease may wait for the file: one
// begun as the wait ends (a pause sleeps until then) still gets to run.
const minTry = maxPoll

// tryContext is the context of a write that tries for the lease, begun at
// start. With --wait, on a file, it ends with the wait (at start+D before
// the wait began), or minTry after start when less is left, so a try that
// finds the file busy waits for it no longer than the wait left, not a
// whole busy timeout. A verb that returns its context's error did nothing
// (the engine's promise), so such a try is one that found the file busy.
// Over a URL a verb cut by its context may have taken effect, and the
// try is not cut.
func (w *waiter) tryContext(start time.Time) (context.Context, context.CancelFunc) {
	if w.o.wait == 0 || isURL(w.path) {
		return context.WithCancel(context.Background())
	}
	end := w.deadline
	if end.IsZero() {
		end = start.Add(w.o.wait)
	}
	return context.WithDeadline(context.Background(), later(end, start.Add(minTry)))
}

// cutByWait reports whether err is the end of a try's context from
// tryContext: the try found the file busy until the wait ran out.
func cutByWait(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// busyBudget is how long the next try may wait for the file's write lock:
// run's busy timeout, but with --wait no longer than the wait left (all of
// it before the wait began). Once the wait has run out it is zero: a try
// that does not wait.
func (w *waiter) busyBudget() time.Duration {
	bt := runBusyTimeout(w.o.ttl)
	if w.o.wait == 0 {
		return bt
	}
	left := w.o.wait
	if !w.deadline.IsZero() {
		left = time.Until(w.deadline)
	}
	return max(min(bt, left), 0)
}

// pause waits up to d for another try, saying once what run waits for
// (why, a message naming the file). Once the wait has run out it returns
// the exit for why, with status code; a signal ends the wait with its
// status.
func (w *waiter) pause(code int, why string, d time.Duration) error {
	// What is left is measured at the moment a refusal that begins the
	// wait begins it: all of it, however long the goroutine takes to get
	// here on a loaded machine, so the wait is said before it can run out.
	now := time.Now()
	w.startAt(now)
	remaining := w.deadline.Sub(now)
	if remaining <= 0 {
		// The whole wait has passed, though perhaps all of it in watch,
		// or in a first try that found the file busy (startAt), before
		// the "waiting up to" line had a reason to be printed.
		if w.o.wait > 0 {
			why += fmt.Sprintf(" (waited %s)", w.o.wait)
		}
		return exit(code, "%s", why)
	}
	if !w.said {
		w.a.errorf("%s; waiting up to %s", why, w.o.wait)
		w.said = true
	}
	select {
	case <-time.After(min(d, remaining)):
		return nil
	case sig := <-w.sigs:
		return exit(signalStatus(sig), "%s: %v while waiting for lease %s", shown(w.path), sig, quote(w.o.lease))
	}
}
