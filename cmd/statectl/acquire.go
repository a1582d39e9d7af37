package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/statekit/statekit/state"
)

// Taking run's lease. Another owner's live lease is waited for up to
// --wait, and so is a file whose write lock another process holds.
//
// A lease held by run's own owner is one of two things. A run of that
// owner that died (a supervisor that crashed and restarts with the same
// --owner) leaves a lease nobody renews: run takes it over at once, with a
// new fencing token, rather than wait for its ttl to run out. A run of
// that owner that is alive renews it every third of its ttl: run treats it
// as held by another, since two copies of the job must not run at once
// (nor the first to end release the lease under the other). run tells the
// two apart by watching the lease: a live holder renews it before a third
// of its time left has passed, so a lease whose deadline has not moved
// when half of its time left has passed is taken over. Two runs of one
// owner may both find the lease free at the same moment: the grant that
// comes second extends the first one's lease (Lease.Extended), and its
// run goes back to watching it rather than run the command.

// acquire takes the lease, waiting for it up to --wait. It returns the
// lease and the time just before the grant, from which the lease lasts at
// least its ttl.
func acquire(db *state.DB, w *waiter) (*state.Lease, time.Time, error) {
	for {
		if err := w.reclaim(db); err != nil {
			return nil, time.Time{}, err
		}
		start := time.Now()
		ctx, cancel := w.tryContext(start)
		l, err := db.Lease(ctx, w.o.lease, w.o.owner, w.o.ttl)
		cut := cutByWait(ctx, err)
		cancel()
		if err == nil && l.Extended {
			// Another run of this owner was granted the lease after
			// reclaim looked, and this grant extended it, with its token:
			// that run's lease, which reclaim now watches.
			continue
		}
		if err == nil {
			return l, start, nil
		}
		var held *state.LeaseHeldError
		var why string
		code, pause := exitHeld, maxPoll
		switch {
		case errors.As(err, &held):
			why = fmt.Sprintf("%s: lease %s is held by %s for %s more", shown(w.path), quote(held.Name), quote(held.Owner), dur(held.Left))
			pause = max(min(maxPoll, held.Left), minPoll)
		case errors.Is(err, state.ErrBusy) || cut:
			// The wait for the file was part of the wait, from the try's
			// start (the wait's beginning, if this is its first refusal).
			w.startAt(start)
			code, why = exitError, busyMessage(w.path)
		default:
			return nil, time.Time{}, fileError(w.path, err)
		}
		if err := w.pause(code, why, pause); err != nil {
			return nil, time.Time{}, err
		}
	}
}

// reclaim takes over a lease of run's owner that nobody renews (a run of
// that owner died), and waits while a live run of that owner renews it.
// It returns with the lease free or held by another owner, for the grant
// to find out which, or with the exit of a wait that ran out.
func (w *waiter) reclaim(db *state.DB) error {
	for {
		start := time.Now()
		ctx, cancel := w.tryContext(start)
		info, err := heldBy(ctx, db, w.o.lease, w.o.owner)
		cut := cutByWait(ctx, err)
		cancel()
		switch {
		case errors.Is(err, state.ErrBusy) || cut:
			// A read may write the handle's time mark, and wait for the
			// file as a write does. Not the grant: it would extend a
			// lease of this owner that nobody renews, keeping its token.
			w.startAt(start)
			if err := w.pause(exitError, busyMessage(w.path), maxPoll); err != nil {
				return err
			}
			continue
		case err != nil:
			return fileError(w.path, err)
		case info == nil:
			return nil
		}
		seen, err := w.watch(db, *info)
		switch {
		case err != nil:
			return err
		case seen == leaseMoved:
			continue // released or granted anew meanwhile: look again
		case seen == leaseStale:
			lost, err := w.releaseStale(db, *info)
			if err != nil {
				return err
			}
			if lost {
				continue // expired, released or taken meanwhile: look again
			}
			w.a.errorf("%s: lease %s of this owner, %s, was not renewed: taking it over from token %d",
				shown(w.path), quote(info.Name), quote(info.Owner), info.Token)
			return nil
		}
		why := fmt.Sprintf("%s: lease %s is held by %s, this owner, in another run that renews it",
			shown(w.path), quote(info.Name), quote(info.Owner))
		if err := w.pause(exitHeld, why, maxPoll); err != nil {
			return err
		}
	}
}

// releaseStale releases the lease info describes, which nobody renews, so
// that the grant after it takes a new fencing token, waiting up to --wait
// while the file is busy: a grant without the release would extend the
// lease with its token, which its holder, if it was only paused, would
// share. lost says the lease was no longer that grant (it expired, or was
// released or granted anew meanwhile).
func (w *waiter) releaseStale(db *state.DB, info state.LeaseInfo) (lost bool, err error) {
	stale := &state.Lease{Name: info.Name, Owner: info.Owner, Token: info.Token}
	for {
		ctx, cancel := w.tryContext(time.Now())
		err := db.Release(ctx, stale)
		cut := cutByWait(ctx, err)
		cancel()
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, state.ErrLeaseLost):
			return true, nil
		case !errors.Is(err, state.ErrBusy) && !cut:
			return false, fileError(w.path, err)
		}
		if err := w.pause(exitError, busyMessage(w.path), maxPoll); err != nil {
			return false, err
		}
	}
}

// What watch saw of a lease.
const (
	leaseRenewed = iota // its deadline moved: a live holder renews it
	leaseStale          // its deadline stood still: nobody renews it
	leaseMoved          // it was released, or expired, or granted anew
)

// watch looks at the lease info describes until its deadline moves or it
// is no longer the same grant, or until half of its time left has passed
// with neither (leaseStale).
func (w *waiter) watch(db *state.DB, info state.LeaseInfo) (int, error) {
	w.start()
	until := time.Now().Add(info.Left / 2)
	for time.Now().Before(until) {
		select {
		case <-time.After(min(maxPoll, max(time.Until(until), minPoll))):
		case sig := <-w.sigs:
			return 0, exit(signalStatus(sig), "%s: %v while waiting for lease %s", shown(w.path), sig, quote(w.o.lease))
		}
		ctx, cancel := context.WithDeadline(context.Background(), later(until, time.Now().Add(minTry)))
		now, err := heldBy(ctx, db, info.Name, info.Owner)
		cut := cutByWait(ctx, err)
		cancel()
		switch {
		case errors.Is(err, state.ErrBusy) || cut:
			continue
		case err != nil:
			return 0, fileError(w.path, err)
		case now == nil || now.Token != info.Token:
			return leaseMoved, nil
		case !now.Expires.Equal(info.Expires):
			return leaseRenewed, nil
		}
	}
	return leaseStale, nil
}

// heldBy returns the lease name if owner holds it now, or nil.
func heldBy(ctx context.Context, db *state.DB, name, owner string) (*state.LeaseInfo, error) {
	var found *state.LeaseInfo
	err := db.Leases(ctx, false, func(l state.LeaseInfo) error {
		if l.Name == name && l.Owner == owner && l.Status == state.LeaseHeld {
			found = &l
		}
		return nil
	})
	return found, err
}

// busyMessage says the file at path is busy.
func busyMessage(path string) string {
	return shown(path) + ": the file is busy (another process holds its write lock)"
}
