package sim

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
)

// The foreign program is another program on the file: the sqlite3 shell
// run by a user who wants the file in a journal mode of their own. It
// opens the file with plain SQLite (no statekit), asks for a rollback
// journal mode (DELETE, TRUNCATE or PERSIST, which leaves the journal
// behind with its header zeroed), and then, two times in three, begins a write in
// that mode with a tiny page cache, so that changed pages spill into the
// file before any commit, and is killed before it commits (or the power
// goes, when mid-op cuts are on: one in three is armed within its disk
// calls). It never commits: what it leaves is either a statekit file in
// rollback mode or one with a hot -journal, and the history stays the
// clients' alone. After it, a read-only Open may be refused with
// state.ErrUnfinishedWrite until a writable Open has succeeded (it rolls
// the write back, or one cut short in its own switch back to WAL mode);
// the writable Opens that follow must roll it back, put the file back in
// WAL mode and lose nothing.
//
// SQLite changes the journal mode only while no other connection has the
// file open, so such a program waits for a moment when none has. Half of
// the programs write in WAL mode instead, at once, beside the processes:
// a transaction whose pages spill into the WAL as frames no commit
// follows, which the wal-index lists past its last commit, killed before
// its commit (a program that finds the write lock taken ends); one in three
// holds the write lock first, up to twice the engine's busy timeout, as a
// shell left in a transaction does, and the processes' calls that wait
// for it past their busy timeout may fail with ErrBusy. A third of the
// programs in WAL mode read instead (foreignread.go): they keep a read
// snapshot, behind which the WAL cannot start over, and end their read or
// are killed.
//
// It runs only once the file has its schema, and only while no read,
// write or sync error and no full disk has struck since the last
// writable Open began: after one, the statekit Open that follows repairs
// the WAL (state/walrepair.go), and plain SQLite, which knows nothing of
// that repair, would checkpoint what the failure left. Injected errors
// pass the program itself over (faults.MemFS.Spare): a sync of another
// program's that failed is one no statekit process can learn of (Linux
// tells only the descriptors open at the time), and with it the pages it
// was to make durable could be lost at the next power loss, whatever
// statekit did. Power cuts and a full disk reach it.

// foreignPID is the foreign program's process id: past the inspector.
const foreignPID = MaxProcs + 3

// A foreign program writing in WAL mode holds the write lock, one time in
// three, for foreignHoldMin ms and up to foreignHoldSpan more: past the
// engine's busy timeout (5 s) about half the time.
const (
	foreignHoldMin  = 100
	foreignHoldSpan = 10_000
)

// A foreign program reading in WAL mode keeps its snapshot for
// foreignKeepMin ms and up to foreignKeepSpan more: a shell left in a read
// transaction, behind which the WAL cannot start over.
const (
	foreignKeepMin  = 100
	foreignKeepSpan = 30_000
)

// foreignModes are the rollback journal modes the foreign program asks for.
var foreignModes = []string{"delete", "truncate", "persist"}

// foreignCallsMax bounds where a power cut armed for the foreign program
// falls: within this many of the disk calls that change it.
const foreignCallsMax = 30

// foreignBlob is the size of the value the foreign write gives every row,
// and of each of the 16 rows it adds in a table of its own: pages enough
// that the pages it changed spill into the file before any commit.
const foreignBlob = 40000

// foreignPlan is a foreign program drawn and waiting for the file to be
// free of processes: whether it writes, and the power cut armed as it
// starts (n == 0: none).
type foreignPlan struct {
	write bool
	cut   armedCut
	visit int    // statectl's reads right after the kill: a user looking at what it left; 0: none
	mode  string // the journal mode it asks for
	wal   bool   // it writes in WAL mode, beside the processes, and asks for no mode
	hold  int64  // ms it holds the write lock before it is killed, in WAL mode: a shell left in a transaction
	read  bool   // in WAL mode, it reads instead and keeps its snapshot for hold ms
	exits bool   // a reader ends its transaction and closes the file when its hold ends, instead of being killed
}

// foreign draws a foreign program, to run as soon as no process has the
// file open (foreignStart), unless one is drawn already. It reports false:
// what is counted is the program's start.
func (w *world) foreign(r *rand.Rand) bool {
	write, cut := r.IntN(3) != 0, r.IntN(3) == 0
	mode, n := lossMode(r), 1+r.Int64N(foreignCallsMax)
	visit := r.IntN(2) * (1 + r.IntN(inspectCallsMax))
	jmode := foreignModes[r.IntN(len(foreignModes))]
	if w.foreignNext != nil {
		return false
	}
	w.foreignNext = &foreignPlan{write: write, visit: visit, mode: jmode}
	hold := int64(0)
	if w.rngForeignHold.IntN(3) == 0 {
		hold = foreignHoldMin + w.rngForeignHold.Int64N(foreignHoldSpan)
	}
	read, keep, exits := w.rngForeignRead.IntN(3) == 0, foreignKeepMin+w.rngForeignRead.Int64N(foreignKeepSpan), w.rngForeignRead.IntN(2) == 0
	if w.rngForeign.IntN(2) == 0 {
		w.foreignNext.wal, w.foreignNext.write, w.foreignNext.hold = true, true, hold
		write = true
		if read {
			w.foreignNext.read, w.foreignNext.write, w.foreignNext.hold, w.foreignNext.exits = true, false, keep, exits
			write = false
		}
	}
	if write && cut && w.cfg.Rates.MidOp > 0 {
		w.foreignNext.cut = armedCut{n: n, mode: mode}
	}
	return false
}

// foreignStart starts the foreign program drawn, once no process has the
// file open or is opening or closing it, the power is on, the file has its
// schema, and no error struck since the last writable Open began.
// Processes may start beside it: SQLite's locks decide who goes first.
// It reports whether it started it.
func (w *world) foreignStart() bool {
	plan, f := w.foreignNext, w.outsider
	if plan == nil || f.starting || w.ending || !w.m.Powered() || !w.schemaSeen || w.errorsSince(w.errorsAtOpen) {
		return false
	}
	for _, p := range w.allProcs() {
		if !plan.wal && (p.db != nil || p.starting || p.stopping) {
			return false
		}
	}
	w.foreignNext = nil
	w.stats.Faults[faultNames[faultForeign]]++
	f.starting = true
	fs := w.m.Process(f.pid)
	what := "switches the file to journal_mode=" + plan.mode
	switch {
	case plan.read:
		what = "reads beside the processes and keeps its snapshot"
	case plan.wal:
		what = "writes beside the processes and is killed"
	case plan.write:
		what += ", writes and is killed"
	}
	w.logf("sqlite3 as p%d %s", f.pid, what)
	if plan.cut.n > 0 {
		w.m.PowerLossAt(plan.cut.n, plan.cut.mode)
		w.logf("fault: power cut (%s) armed at mutating call %d, as sqlite3 runs", plan.cut.mode, plan.cut.n)
	}
	w.sched.spawn(kindTask, fmt.Sprintf("p%d sqlite3", f.pid), f, w.newClient(), func(*thread) {
		w.foreignRun(f, fs, plan)
	})
	return true
}

// errorsSince reports whether an injected error or a refused write struck
// since the disk's error count was n (errorCount).
func (w *world) errorsSince(n int64) bool { return w.errorCount() != n }

// errorCount is the disk's injected errors and writes refused for space so
// far.
func (w *world) errorCount() int64 {
	st := w.m.Stats()
	return st.InjectedErrors + st.NoSpaceErrors
}

// foreignRun is the foreign program's thread: plain SQLite on the file
// through f's view of the disk.
func (w *world) foreignRun(f *process, fs *faults.ProcessFS, plan *foreignPlan) {
	defer func() { f.starting = false }()
	name, unregister, err := vfs.Register(fs)
	if err != nil {
		panic(fmt.Sprintf("sim: register the foreign program's file system: %v", err))
	}
	defer unregister()
	// mode=rw: a program that finds no file makes none.
	db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?vfs=%s&mode=rw&_pragma=busy_timeout(0)", dbPath, name))
	if err != nil {
		panic(fmt.Sprintf("sim: the foreign program's DSN: %v", err))
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		w.foreignEnd(f, "open", err)
		return
	}
	defer conn.Close()
	if !w.foreignSwitch(f, conn, plan) {
		return
	}
	if plan.read {
		w.foreignRead(f, conn, plan)
		return
	}
	for _, q := range []string{
		"PRAGMA cache_size=2",
		"BEGIN IMMEDIATE",
		"UPDATE meta SET v = v + 1",
		fmt.Sprintf("UPDATE kv SET value = zeroblob(%d)", foreignBlob),
		"DELETE FROM leases",
		// New pages, which push the changed ones out of the cache.
		"CREATE TABLE foreign_junk(b)",
		fmt.Sprintf("INSERT INTO foreign_junk SELECT zeroblob(%d) FROM "+
			"(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 16) SELECT x FROM c)", foreignBlob),
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			w.foreignEnd(f, q, err)
			return
		}
	}
	if w.tearing || !w.m.Powered() {
		return
	}
	if plan.hold > 0 {
		// The process's calls that need the lock meanwhile wait, and give
		// up with ErrBusy past their busy timeout, as beside a paused one.
		w.foreignHolding = true
		w.pauses++
		w.logf("p%d (sqlite3) holds the write lock for %dms", f.pid, plan.hold)
		// It holds it whatever strikes meanwhile: an Open that needs the
		// lock to repair the WAL after a failed sync waits for it, as any
		// writer does, and fails with ErrBusy past its busy timeout.
		w.sched.sleep(time.Duration(plan.hold)*time.Millisecond, nil)
		w.foreignHolding = false
		if w.tearing || !w.m.Powered() {
			return
		}
	}
	if foreignCommits {
		_, err := conn.ExecContext(ctx, "DROP TABLE foreign_junk")
		if err == nil {
			_, err = conn.ExecContext(ctx, "COMMIT")
		}
		w.foreignEnd(f, "COMMIT", err)
		return
	}
	w.m.Crash(f.pid)
	if plan.wal {
		w.logf("p%d (sqlite3) killed before its commit, its pages in the WAL", f.pid)
	} else {
		w.logf("p%d (sqlite3) killed before its commit", f.pid)
	}
	if i := w.inspector; plan.visit > 0 && i.db == nil && !i.starting && !w.ending {
		i.readOnly, i.reads = true, plan.visit
		if w.start(i) {
			w.logf("statectl visits as p%d, %d reads", i.pid, i.reads)
		}
	}
}

// foreignSwitch asks for plan's journal mode (for a program that writes
// in WAL mode, it reads the mode the file is in), and reports whether the
// program goes on to write.
func (w *world) foreignSwitch(f *process, conn *sql.Conn, plan *foreignPlan) bool {
	ctx := context.Background()
	var mode string
	if plan.wal {
		if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			w.foreignEnd(f, "PRAGMA journal_mode", err)
			return false
		}
		if plan.read && mode != "wal" {
			w.foreignEnd(f, "reads nothing: the file is in journal_mode="+mode, nil)
			return false
		}
		if mode != "wal" {
			w.hotMaybe = true // a program before it switched the file: it writes through a journal
		}
		return true
	}
	// From here the file may be in rollback mode, and a -journal may be
	// left hot: the switch out of WAL mode writes the file's header
	// through one, after its checkpoint.
	w.rollbackMode, w.hotMaybe = true, true
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode="+plan.mode).Scan(&mode); err != nil || mode != plan.mode {
		w.foreignEnd(f, "journal_mode="+plan.mode+" ("+mode+")", err)
		return false
	}
	if !plan.write {
		w.foreignEnd(f, "done, the file in rollback mode", nil)
		return false
	}
	return true
}

// foreignCommits, set by a test only, has the foreign program commit its
// write to the rows (its own table dropped) instead of being killed before
// it: a change no client made, which the checks must catch.
var foreignCommits = false

// foreignEnd records where the foreign program stopped, and why.
func (w *world) foreignEnd(f *process, where string, err error) {
	if w.tearing || !w.m.Powered() {
		return
	}
	why := "ok"
	if err != nil {
		why = "failed" // busy: a process opened the file first; or the disk was full
	}
	w.logf("p%d (sqlite3) %s: %s", f.pid, where, why)
}

// foreignRefused reports whether a read-only open's refusal is a write
// outside the WAL left hot: the foreign program's (its switch out of WAL
// mode, or its write), or a writable open's that began while the file
// may have been in rollback mode (its switch back to WAL
// mode writes through a rollback journal, and a full disk, an I/O error, a
// crash or a power cut may leave it), right until a writable open
// succeeds.
func (w *world) foreignRefused(err error) bool {
	return w.hotMaybe && errors.Is(err, state.ErrUnfinishedWrite)
}
