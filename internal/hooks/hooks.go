// Package hooks is how statekit's own simulator and stress tests reach
// inside the engine: planted bugs, a scheduler that owns every goroutine and
// lock of a handle, an observer of the times verbs run at and of buffered
// flushes, and denser cadences for background work. It is internal, so no
// application can set any of it, and package state's documentation shows
// none of it.
package hooks

import (
	"context"

	"github.com/statekit/statekit/internal/bugs"
)

// Engine is what the simulator or the stress test sets on one handle. The
// zero Engine changes nothing.
type Engine struct {
	// Bugs are the planted bugs compiled into the engine.
	Bugs bugs.Set
	// Sched, when not nil, runs the handle's goroutines and decides every
	// wait: taking the handle's lock, waiting in the group-commit queue,
	// the background goroutines' waits. Nil means real goroutines and
	// locks.
	Sched Scheduler
	// Flushes, when not nil, is told of every flush of buffered
	// increments, background ones included.
	Flushes FlushObserver
	// Sweeps, when not nil, is told of every sweep statement, inline ones
	// included, and of the keys it deleted.
	Sweeps SweepObserver
	// Times, when not nil, is told every engine time (unix ms) the handle
	// claims for a verb or for background work, as it claims it.
	Times func(nowMillis int64)
	// Nows, when not nil, is told every answer DB.Now gives (unix ms), as
	// it gives it: a time read, not claimed.
	Nows func(nowMillis int64)
	// CheckpointEvery, when above 0, replaces the number of writes between
	// two background checkpoints, so that a short simulated run reaches
	// them.
	CheckpointEvery int
	// InlineSweepEvery, when above 0, replaces the number of writes between
	// two inline sweep batches.
	InlineSweepEvery int
	// SweepStepRows, when above 0, bounds a sweep step (one DELETE) to
	// that many rows instead of the engine's bound, so that a simulated
	// run's few keys take sweeps of several steps and transactions.
	SweepStepRows int
	// SQLiteBusySchedule makes the handle wait for another process's lock
	// on SQLite's own schedule (1, 2, 5 ... 100 ms apart) instead of the
	// engine's, so that statekit's benchmark can run both in one run.
	SQLiteBusySchedule bool
	// KeepIndexAfterFailedSync stops the handle from marking the WAL's
	// shared index for rebuilding after a failed sync (state's
	// indexforget.go), so that tests reach the checks for a hole nobody
	// marked: a file system that dropped the pages when its write-back
	// failed, before any sync reported it.
	KeepIndexAfterFailedSync bool
	// LossFound, when not nil, is told each time the handle, looking
	// after a failed sync, finds writes the file system took back: what
	// says where ("wal": a frame the shared index counts breaks the WAL's
	// checksum chain or is missing; "file": a page a checkpoint copied
	// into the database file reads back otherwise). A file it could not
	// read is not a finding and is not told. On a file system that keeps a
	// failed sync's writes readable it must never be called.
	LossFound func(what string)
}

// Option turns an Engine into a state.Option (returned as any: this
// package cannot name state's types). Package state sets it in its init.
var Option func(Engine) any

// Scheduler owns the goroutines and waits of a handle, so that one seed
// decides their interleaving. Exactly one goroutine under a Scheduler runs
// at a time; each gives the turn back at every wait.
type Scheduler interface {
	// Go runs fn on a new goroutine under the scheduler. name says what it
	// is (for traces).
	Go(name string, fn func())
	// Wait gives the turn back until ready reports true. The scheduler
	// calls ready only while no goroutine under it runs, and when ready
	// reports true the caller runs next, so ready may take what it reports
	// on (a TryLock). A nil ready is a plain scheduling point: the caller
	// may run again at once, or after others.
	Wait(ready func() bool)
}

// FlushObserver is told of buffered flushes.
type FlushObserver interface {
	// Flushing is called with the deltas a flush took from the buffer,
	// before it writes them. It returns two functions (either may be nil):
	// claimed is called each time the flush claims an engine time, as it
	// claims it, so that a flush cut short (a crash, a power loss) is
	// still known to have run at that time; done is called when the flush
	// ends, with the engine time it ran at (0 if it never claimed one), its
	// error, and whether all the deltas went back into the buffer (when
	// only some did, a remote store's, the error is a *state.FlushError
	// naming them in Kept).
	Flushing(deltas map[string]int64) (claimed func(nowMillis int64), done func(nowMillis int64, err error, restored bool))
}

// SweepObserver is told of sweeps.
type SweepObserver interface {
	// Sweeping is called before a sweep statement that deletes keys whose
	// deadline is at or before cutoffMillis. The returned function is
	// called after it, with the keys it deleted and its error: for a sweep
	// transaction (Sweep, the background sweeper) once the engine is done
	// with it, after its commit's sync when the handle syncs its commits,
	// so the error may be that sync's (and the keys then nil); for an
	// inline sweep at once, its commit synced with the next write's.
	// inline says which: an inline sweep runs after another verb's write,
	// on whichever goroutine leads that verb's group, and is no part of a
	// Sweep call that goroutine may be making.
	Sweeping(cutoffMillis int64, inline bool) func(keys []string, err error)
}

// nowKey is the context key of a verb's now observer.
type nowKey struct{}

// WithNow returns ctx carrying fn, which the engine calls with the engine
// time (unix ms) a verb called with that context runs at, each time it
// claims one.
func WithNow(ctx context.Context, fn func(nowMillis int64)) context.Context {
	return context.WithValue(ctx, nowKey{}, fn)
}

// NoteNow tells ctx's now observer, if any, the time its verb runs at.
func NoteNow(ctx context.Context, nowMillis int64) {
	if fn, ok := ctx.Value(nowKey{}).(func(int64)); ok {
		fn(nowMillis)
	}
}
