package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Close flushes buffered increments, stops background work and closes the
// file. Every later call, Close included, returns ErrClosed; a Close
// called while another runs returns it once that one has returned, so a
// program may exit as soon as either returns. A background
// sweep in flight stops after its transaction, leaving the rest of its
// backlog (expired keys, absent to every verb) for a later sweep.
//
// Close always closes, and returns one error saying what it could not do.
// Buffered increments it could not write are named in it, key by key (on
// a full disk it first empties the WAL into the file, which gives the WAL's
// space back, and tries once more). A failure to record the handle's last
// time loses nothing: the next Open starts from the mark the handle kept
// up to date, as after a crash.
func (db *DB) Close() error {
	if db.remote != nil {
		return db.closeRemote()
	}
	db.bg.stop(db)
	d, lostErr, flushErr, open := db.lastFlush()
	if !open {
		return db.closedAlready()
	}
	defer close(db.closeDone)
	start := db.cfg.clock.Monotonic()
	db.lock()
	defer db.unlock()
	if db.closed {
		return db.named("close", "", ErrClosed)
	}
	db.closed = true
	db.setWait(context.Background(), db.cfg.clock.Monotonic()-start)
	var damageErr error
	if !db.cfg.readOnly && !db.lockless {
		// The last connection to close checkpoints: not a damaged WAL.
		// (Without locks it cannot: locklost.go.)
		damageErr = db.refuseOutsideDamage()
	}
	if db.failed != nil && !db.cfg.readOnly && !db.lockless {
		db.closeFailed() // not without locks: others may be writing the file (locklost.go)
	}
	foldErr := db.foldHWM(context.Background())
	if foldErr == nil {
		foldErr = db.syncCommitted(false) // a SyncFull handle's fold is synced as any commit
	}
	return db.closeError(d, damageErr, lostErr, flushErr, foldErr, db.releaseHandle())
}

// closedAlready is Close's answer when another Close took the handle: it
// waits for that one to return (the file checkpointed and closed), then
// returns ErrClosed. Under a scheduler the wait is the scheduler's, which
// runs the first Close meanwhile.
func (db *DB) closedAlready() error {
	if s := db.cfg.sched; s != nil {
		s.Wait(func() bool {
			select {
			case <-db.closeDone:
				return true
			default:
				return false
			}
		})
	} else {
		<-db.closeDone
	}
	return db.named("close", "", ErrClosed)
}

// closeError makes Close's one error out of what failed: background
// flushes not reported yet (lostErr), the flush of the buffered deltas d,
// the fold of the time mark, the closing of the connections, and damage
// another program did to the files (walcheck.go). Each part is a line's
// worth, joined on one line.
func (db *DB) closeError(d map[string]int64, damageErr, lostErr, flushErr, foldErr, releaseErr error) error {
	var msgs []string
	var errs []error
	if damageErr != nil {
		msgs = append(msgs, fmt.Sprintf("%v; the WAL was left as it is, not copied into the file", damageErr))
		errs = append(errs, damageErr)
	}
	if lostErr != nil {
		msgs = append(msgs, lostErr.Error())
		errs = append(errs, lostErr)
	}
	var fe *FlushError
	switch {
	case flushErr == nil:
	case errors.As(flushErr, &fe):
		msgs = append(msgs, flushErr.Error())
		errs = append(errs, flushErr)
	case errors.Is(flushErr, ErrOutcomeUnknown):
		msgs = append(msgs, fmt.Sprintf("buffered increments may or may not have been written (%s), and are not sent again, which could count them twice: %v", deltasText(d), flushErr))
		errs = append(errs, flushErr)
	default:
		msgs = append(msgs, fmt.Sprintf("buffered increments not written (%s): %v", deltasText(d), flushErr))
		errs = append(errs, flushErr)
	}
	if foldErr != nil && flushErr != nil && sameTrouble(foldErr, flushErr) {
		foldErr = nil // the disk was full, or the file busy, for both: said once
	}
	if foldErr != nil {
		msgs = append(msgs, fmt.Sprintf("the handle's last time was not recorded, which loses nothing "+
			"(the next open starts from the mark it kept, as after a crash): %v", foldErr))
		errs = append(errs, foldErr)
	}
	if releaseErr != nil {
		msgs = append(msgs, fmt.Sprintf("closing the file: %v", oneLine(releaseErr.Error())))
		errs = append(errs, releaseErr)
	}
	if len(errs) == 0 {
		return nil
	}
	return &causeError{msg: fmt.Sprintf("%s: close: %s", db.path, strings.Join(msgs, "; also, ")), errs: errs}
}

// sameTrouble reports whether a and b are both a full disk, or both a busy
// file.
func sameTrouble(a, b error) bool {
	for _, e := range []error{ErrDiskFull, ErrBusy} {
		if errors.Is(a, e) && errors.Is(b, e) {
			return true
		}
	}
	return false
}

// deltasText lists buffered deltas for an error: "hits" +3, "misses" -1,
// the first few in key order.
func deltasText(d map[string]int64) string {
	const max = 8
	keys := slices.Sorted(maps.Keys(d))
	parts := make([]string, 0, max+1)
	for i, k := range keys {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more keys", len(keys)-max))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %+d", keyName(k), d[k]))
	}
	return strings.Join(parts, ", ")
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}

// makeRoom empties the WAL into the database file and truncates it, without
// waiting for anyone, so that a write refused for a full disk can be tried
// once more: the WAL's space goes back to the file system. It reports
// whether it did. Callers do not hold mu.
func (db *DB) makeRoom(ctx context.Context) bool {
	db.lock()
	defer db.unlock()
	if db.failed != nil || db.cfg.readOnly || db.conn == nil {
		return false
	}
	var busy, frames, copied int64
	err := db.withoutBusyWait(ctx, func() error {
		return db.conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &copied)
	})
	if syncFailed(err) {
		db.forgetCheckpoint(db.conn)
	}
	if err = classify(ctx, roomRefusedOn(db.conn, err)); err != nil {
		db.note(fmt.Errorf("checkpoint: %w", err))
		return false
	}
	return busy == 0
}
