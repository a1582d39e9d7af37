package main

import (
	"errors"
	"time"

	"github.com/statekit/statekit/state"
)

// openForRun opens path for run, trying again while another process holds
// its write lock, up to --wait (w). Each try waits for the lock no longer
// than the wait left (waiter.busyBudget), so run gives up when the wait
// ends, and the first try's wait is part of it. The handle's busy timeout
// is run's, which renewals need: a try cut shorter than that which opened
// the file only showed the lock was free, and the file is opened again
// with it. That open waits a busy timeout only if another process took the
// lock in between.
func openForRun(path string, w *waiter) (*state.DB, error) {
	bt := runBusyTimeout(w.o.ttl)
	for {
		budget := w.busyBudget()
		tried := time.Now()
		db, err := openWrite(path, state.WithBusyTimeout(budget))
		if err == nil && budget < bt && !isURL(path) {
			// What its Close may fail to do, record the handle's last
			// time, loses nothing; any other trouble meets the open that
			// follows.
			_ = db.Close()
			db, err = openWrite(path, state.WithBusyTimeout(bt))
		}
		if !errors.Is(err, state.ErrBusy) {
			return db, err
		}
		w.startAt(tried)
		if err := w.pause(exitError, busyMessage(path), maxPoll); err != nil {
			return nil, err
		}
	}
}
