package state

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// One flush at a time. A flush takes the buffered deltas and holds them
// until it has written them, put them back (nothing was written) or given
// up on them (reported): while a background flush holds them, the buffer
// looks empty. So every flush takes the buffer's turn first: Flush and
// Close wait for a flush in flight, and the background flusher skips its
// round when another flush has the turn. After Flush returns nil, every
// increment buffered before the call is written, on a file and on a
// remote store alike. A background flush's error has no caller: unless it
// kept its deltas for the next flush, it is kept (lost) for the next
// Flush or Close to return.

// maxLost bounds the background flush errors kept for the next Flush;
// those past it are counted.
const maxLost = 8

// turnChan returns the buffer's turn, made on first use.
func (b *buffer) turnChan() chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.turn == nil {
		b.turn = make(chan struct{}, 1)
	}
	return b.turn
}

// takeTurn waits for the buffer's turn, or until ctx ends. Under a
// simulator's scheduler it waits through the scheduler, whose contexts do
// not end.
func (db *DB) takeTurn(ctx context.Context) error {
	turn := db.buf.turnChan()
	if s := db.cfg.sched; s != nil {
		s.Wait(func() bool {
			select {
			case turn <- struct{}{}:
				return true
			default:
				return false
			}
		})
		return nil
	}
	select {
	case turn <- struct{}{}:
		return nil
	default:
	}
	select {
	case turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("statekit: %w (waiting for another flush in flight)", ctx.Err())
	}
}

// tryTurn takes the buffer's turn if no flush has it.
func (db *DB) tryTurn() bool {
	select {
	case db.buf.turnChan() <- struct{}{}:
		return true
	default:
		return false
	}
}

// giveTurn gives the buffer's turn back.
func (db *DB) giveTurn() { <-db.buf.turnChan() }

// backgroundFlush is the background flusher's round: it writes what is
// buffered unless another flush has the turn (that one takes it), and
// keeps its error for the next Flush or Close when it lost deltas (not
// when they were all written or went back into the buffer).
func (db *DB) backgroundFlush() {
	if db.dead.Load() || db.buf.isClosed() || !db.tryTurn() {
		return
	}
	defer db.giveTurn()
	d := db.buf.take()
	if err := db.flushTaken(context.Background(), d, true); lostDeltas(err) {
		db.buf.keepLost(lostFlushError(d, err))
	}
}

// lastFlush is Close's flush: once no flush is in flight, it stops
// IncrBuffered and writes what was left. It returns those deltas, the
// background flush errors not reported yet, the last flush's error, and
// false when Close ran before.
func (db *DB) lastFlush() (d map[string]int64, lostErr, flushErr error, open bool) {
	_ = db.takeTurn(context.Background())
	defer db.giveTurn()
	d, open = db.buf.close()
	if !open {
		return nil, nil, nil, false
	}
	lostErr = db.buf.takeLost()
	return d, lostErr, db.flushTaken(context.Background(), d, false), true
}

// lostFlushError is the error a background flush of d leaves for the next
// Flush or Close: it names the keys and deltas that were dropped or whose
// outcome is unknown.
func lostFlushError(d map[string]int64, err error) error {
	var fe *FlushError
	switch {
	case errors.As(err, &fe):
		return fmt.Errorf("%w: %w", ErrBackgroundFlush, err) // it names the dropped keys; the others were written
	case errors.Is(err, ErrOutcomeUnknown):
		return fmt.Errorf("%w of %s may or may not have been written, and was not sent again, which could count it twice: %w", ErrBackgroundFlush, deltasText(d), err)
	}
	return fmt.Errorf("%w of %s failed: %w", ErrBackgroundFlush, deltasText(d), err)
}

// keepLost keeps a background flush's error for the next Flush or Close.
func (b *buffer) keepLost(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.lost) == maxLost {
		b.lostMore++
		return
	}
	b.lost = append(b.lost, err)
}

// takeLost returns the kept background flush errors as one, or nil, and
// forgets them.
func (b *buffer) takeLost() error {
	b.mu.Lock()
	lost, more := b.lost, b.lostMore
	b.lost, b.lostMore = nil, 0
	b.mu.Unlock()
	err := joinErrors(lost...)
	if more > 0 {
		err = fmt.Errorf("%w; also, %d more background flushes failed", err, more)
	}
	return err
}

// joinErrors returns the errors that are not nil as one: nil for none, the
// error itself for one, else their messages joined on one line, wrapping
// each.
func joinErrors(errs ...error) error {
	var kept []error
	var msgs []string
	for _, err := range errs {
		if err != nil {
			kept = append(kept, err)
			msgs = append(msgs, err.Error())
		}
	}
	switch len(kept) {
	case 0:
		return nil
	case 1:
		return kept[0]
	}
	return &causeError{msg: strings.Join(msgs, "; also, "), errs: kept}
}
