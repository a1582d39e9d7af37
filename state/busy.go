package state

import (
	"context"
	"database/sql"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/statekit/statekit/internal/sysclock"
	"github.com/statekit/statekit/state/vfs"
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// One time budget per verb. WithBusyTimeout bounds a whole verb's waits:
// whatever it waits on before its statements run (the handle's lock, held
// by a group commit, a sweep batch or a checkpoint; the group-commit queue)
// is taken out of what SQLite may then wait for another connection's lock.
// SQLite's own busy handler would wait the full timeout for each
// statement, from that statement: a verb queued behind a sweep that was
// itself waiting for a stopped process waited up to twice the timeout. So
// the handle's connection has a busy handler of the engine's (busyHandler):
// it retries on a schedule of its own (busyDelays) and stops once the
// verb's waits add up to the timeout, or once its context is done. The
// waits for the handle's lock and in the queue are measured by the
// injected clock (Clock.Monotonic); the busy handler counts the pauses it
// asks for, or on a real timer what it slept (time the verb spends running
// is not waiting). It sleeps through the clock when it is a Sleeper (so a
// simulator decides), else through the FS's vfs.Sleeper, else on a real
// timer (a precise one below a millisecond: sleep.go).
//
// A holder of the handle's lock holds it at most for its own budget, which
// began before the budget of a verb queued behind it, so a verb queued
// behind others still ends within its own budget, give or take the time
// its statements take to run and a short grace (busyGrace) for a lock
// that another connection holds only for a moment.

// waitBudget is what the busy handler may still wait for the statements
// of the verb holding the handle's lock. Guarded by DB.mu: the handler
// runs on the goroutine that holds it.
type waitBudget struct {
	ctx    context.Context // the verb's; a done context ends the wait
	limit  time.Duration   // the busy timeout; 0: never wait
	waited time.Duration   // what the verb waited for the handle before its statements
	slept  time.Duration   // the pauses the busy handler asked for, for this verb
	grace  time.Duration   // of slept, what it slept past the budget (busyGrace)
	woke   time.Duration   // on the machine's clock: Monotonic after the last pause; 0 before one
}

// realClock reports whether the handle's clock is the machine's own
// (internal/sysclock), whose elapsed time is the verb's.
func (db *DB) realClock() bool {
	r, ok := db.cfg.clock.(interface{ Real() bool })
	return ok && r.Real()
}

// busyDelays is the pause before each retry of a statement that found the
// file locked by another process, then its last entry. Another process's
// write holds the lock for tens of microseconds, so a waiter that sleeps
// milliseconds leaves the file free most of the time it sleeps (SQLite's
// own schedule, sqliteBusyDelays, reaches 100 ms after 12 tries: a process
// that kept missing the lock slept while others took it in turns). The
// engine's first retries come within a tenth of a millisecond and the
// pauses stay short; README's performance section has the measurements
// this schedule was chosen by.
var busyDelays = []time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 200 * time.Microsecond,
	500 * time.Microsecond, time.Millisecond,
}

// sqliteBusyDelays is the schedule of SQLite's default busy handler
// (sqliteDefaultBusyCallback), which the engine used before busyDelays:
// statebench runs it beside the engine's (hooks.Engine.SQLiteBusySchedule).
var sqliteBusyDelays = []time.Duration{1 * time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 15 * time.Millisecond, 20 * time.Millisecond, 25 * time.Millisecond,
	25 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond}

// busyEntry is what the busy handler is registered with: the handle and
// its schedule.
type busyEntry struct {
	db     *DB
	delays []time.Duration
}

// busySchedule returns the handle's schedule.
func (db *DB) busySchedule() []time.Duration {
	if db.cfg.sqliteBusy {
		return sqliteBusyDelays
	}
	return busyDelays
}

// busyHandles maps the argument the busy handler is registered with to
// its handle.
var (
	busyHandles sync.Map // uintptr -> *busyEntry
	busyIDs     atomic.Uintptr
)

// installBusyHandler makes busyHandler the busy handler of conn, the
// handle's connection, and reports whether it could: it needs the SQLite
// handle the driver keeps (see systemErrno). Without it SQLite's own
// handler, with the busy timeout, stays.
func (db *DB) installBusyHandler(conn *sql.Conn) bool {
	installed := false
	_ = conn.Raw(func(dc any) error {
		h := sqliteHandle(dc)
		if h == 0 {
			return nil
		}
		id := busyIDs.Add(1)
		busyHandles.Store(id, &busyEntry{db: db, delays: db.busySchedule()})
		var fp uintptr
		*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&fp)) = busyHandler
		tls := libc.NewTLS()
		defer tls.Close()
		if sqlite3.Xsqlite3_busy_handler(tls, h, fp, id) != sqlite3.SQLITE_OK {
			busyHandles.Delete(id)
			return nil
		}
		db.busyID = id
		installed = true
		return nil
	})
	return installed
}

// forgetBusyHandler drops the handle from busyHandles once its connection
// is closed.
func (db *DB) forgetBusyHandler() {
	if db.busyID != 0 {
		busyHandles.Delete(db.busyID)
		db.busyID = 0
	}
}

// sqliteHandle returns the SQLite handle (sqlite3*) of a driver connection
// of modernc.org/sqlite, which keeps it in its field db, or 0.
func sqliteHandle(dc any) uintptr {
	v := reflect.ValueOf(dc)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return 0
	}
	f := v.Elem().FieldByName("db")
	if !f.IsValid() || f.Kind() != reflect.Uintptr {
		return 0
	}
	return uintptr(f.Uint())
}

// busyHandler is SQLite's busy handler on the handle's connection: it
// returns 1 to try again after a pause, 0 to give up (SQLITE_BUSY).
func busyHandler(_ *libc.TLS, arg uintptr, count int32) int32 {
	v, ok := busyHandles.Load(arg)
	if !ok {
		return 0
	}
	e := v.(*busyEntry)
	if e.db.busyRetry(e.delays, int(count)) {
		return 1
	}
	return 0
}

// busyRetry waits before the count-th retry of a statement that found the
// file locked, and reports whether to retry: not once the waits of the
// verb holding the handle's lock add up to the busy timeout, and a grace
// of millisecond retries is spent. delays is the schedule. Callers hold mu.
func (db *DB) busyRetry(delays []time.Duration, count int) bool {
	w := &db.wait
	var done <-chan struct{}
	if w.ctx != nil {
		if w.ctx.Err() != nil {
			return false
		}
		done = w.ctx.Done()
	}
	real := db.realClock()
	if real && w.woke > 0 {
		// On the machine's clock the budget is the verb's whole time: what
		// the statement ran between two pauses (a retry costs more than a
		// short pause on a busy machine) counts with the pauses.
		w.slept += db.cfg.clock.Monotonic() - w.woke
	}
	d := delays[min(count, len(delays)-1)]
	if left := w.limit - w.waited - w.slept; left > 0 {
		d = min(d, left)
	} else if w.grace = w.slept - max(w.limit-w.waited, 0); w.grace < min(busyGrace(w.limit), w.waited) {
		// The grace is what the statements slept past their part of the
		// budget, as counted above: on a real timer what they slept, not
		// the milliseconds asked for (on a loaded machine each wakes
		// late, and a hundred of them took seconds).
		d = time.Millisecond
	} else {
		return false
	}
	began := db.cfg.clock.Monotonic()
	if db.cfg.sleepStop(d, done) || real {
		// A real timer wakes late (by up to a millisecond's slack): count
		// what it slept, so that many short pauses do not stretch the
		// budget. A clock or FS that decides sleeps is taken at its word:
		// a simulated clock may have moved on far past d meanwhile.
		woke := db.cfg.clock.Monotonic()
		d = max(d, woke-began)
		w.woke = woke
	}
	w.slept += d
	return true
}

// busyGrace is how long a verb whose budget went by before its statements
// ran (queued behind others) still retries a lock, a millisecond apart: a
// tenth of the busy timeout, at most 100 ms, and no more than it waited
// for the handle. Another connection's commit holds the lock for a
// moment; failing a verb for that moment would be a wrong ErrBusy. A verb
// so ends within 1.1 times its busy timeout, and the statements' own
// running time; one that did not wait for the handle, within its timeout.
func busyGrace(limit time.Duration) time.Duration { return min(limit/10, 100*time.Millisecond) }

// setWait gives the statements run next under mu the budget of a verb
// that has waited waited for the handle already. Callers hold mu.
func (db *DB) setWait(ctx context.Context, waited time.Duration) {
	db.wait = waitBudget{ctx: ctx, limit: db.cfg.busyTimeout, waited: max(waited, 0)}
}

// noWait makes the statements run next under mu fail at once on a lock
// another connection holds. Callers hold mu.
func (db *DB) noWait() { db.wait = waitBudget{} }

// sleepStop waits d: through the clock when it is a Sleeper (until stop is
// closed), else through the FS when it decides what SQLite's sleeps do,
// else on a real timer, and then reports true.
func (c config) sleepStop(d time.Duration, stop <-chan struct{}) (real bool) {
	if s, ok := c.clock.(Sleeper); ok {
		s.Sleep(d, stop)
		return false
	}
	if s, ok := c.fs.(vfs.Sleeper); ok {
		s.Sleep(d)
		return false
	}
	if d < time.Millisecond {
		sysclock.Precise(d) // time.Sleep rounds a pause up to a millisecond or more
		return true
	}
	time.Sleep(d)
	return true
}
