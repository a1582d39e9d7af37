// Package stress attacks statekit's real path: several OS processes share
// one state file on disk through SQLite's native VFS (or one Redis server:
// see Redis below), each calling every verb from several goroutines on a
// small key space and holding leases that guard a fenced resource, while
// a driver kills random workers with SIGKILL in the middle of their calls
// and restarts them.
//
// Each worker is this binary re-executed (see WorkerMain). By default it
// opens the file with the engine's default options: the real clock and the
// background sweeper, flusher and checkpointer, so kills land in group
// commits and background checkpoints. Config.StepClock runs it the first
// way instead: one call at a time, without background work, on a clock
// that moves only between calls.
//
// Beside the writing workers run Config.Readers read-only ones, as statectl
// runs beside an application: each opens the live file with
// state.WithReadOnly and state.WithoutBackground, keeps that handle until
// it is killed or stopped, and its clients only Get and TTL keys of the
// current epoch (paced, so as not to crowd the writers out of the
// history). The driver kills them as it kills the others, mid-read, and
// starts each again as a reader. Their calls are journalled and checked
// as every call is.
//
// Every goroutine is a client of its own, with its own lease owner. Its
// calls are journalled as they run, with call and return times from
// CLOCK_MONOTONIC, which every process on the machine shares: when the
// engine claims the time a call runs at (it reports it through
// hooks.WithNow, before it runs the call), as unknown; after it, with the
// answer. A call a kill cut after it claimed its time stays unknown,
// bounded by the time the driver saw the process dead; a call cut before
// never ran and is not in the history. Every flush of buffered increments,
// the background flusher's included, and on the real clock every sweep
// statement, background and inline, is journalled the same way through
// the engine's flush and sweep observers, each as an op of a client of its
// own; callers note each buffered increment before they make it. Errors
// the model has no kind for are noted with their text. When the run ends,
// Run checks (package checks holds the checks beside linearizability):
//
//   - the whole history with package linearizability (a search against
//     package model, partitioned by key; the key group's three keys share
//     a hash tag, so they are one partition and every count of a Del of
//     several of them is checked);
//   - fencing tokens: no token granted to two owners, a grant that starts
//     after another returned never gets a lower token (grants inside an
//     Update that committed count), and the fenced resource accepted each
//     token from one holder only, in order, and only from its holder;
//   - counters, which only increments write (Incr, buffered ones
//     included; readers read them): every increment that returned is counted, each returned
//     a different value, and the final value lies within the unknown
//     ones; each worker's flushes took no more than its callers buffered,
//     and all of it when it closed cleanly, where every op it began, a
//     flush included, has its answer or a noted error (nothing cut it);
//   - clocks: no worker ran at an engine time before one a call of a
//     writing worker that returned before it started had used (the
//     high-water mark carries time across kills; a reader writes no mark,
//     so the times it used, ahead of the wall clock when it started from a
//     killed writer's mark, bind no later worker); on the real clock, each
//     worker's engine time moved with CLOCK_MONOTONIC;
//   - errors: a call that failed with an error the model has no kind for
//     is reported; no fault is injected, so nothing explains one;
//   - the file: state.DB.Check (SQLite's integrity_check and statekit's
//     invariants) finds nothing, and the resource passes integrity_check.
//
// # Time
//
// A verb's answer depends on the engine's now (deadlines, TTLs, lease
// expiry), and the linearizability check compares answers exactly, so each recorded call
// carries the exact now the engine used, as the engine reported it. The
// processes' engine clocks disagree with each other (each starts from the
// wall clock or the file's high-water mark at its open); the checks need
// no agreement, since every answer is compared with the model at its own
// call's now, and Report.ClockSpread says how far apart they were.
//
// A sweep deletes the keys expired at its own process's now, which
// another process's now (or a call of any process that claimed its time a
// moment before the sweep ran) may still count live: unrecorded, that
// would look like a lost write. So every sweep statement is in the
// history: on the stepped clock workers sweep only as a recorded verb; on
// the real clock the sweep observer records each statement of the
// background sweeper and of the inline sweeps as a Del, at the sweep's
// cutoff, of the keys it deleted, which found none of them live (a sweep
// that deleted a live key fails that).
//
// Now and then a client writes a key of its own with a TTL of a
// millisecond, waits a few, and reads it back: a read of a key that has
// certainly expired, however fast or slow the machine.
//
// The key space is tiny, and changes every Config.EpochEvery: a key's
// history stays short however long the run, since the check's time and
// memory grow faster than the history of one key.
//
// # Redis
//
// With Config.Redis the workers open a redis:// URL instead of the file
// (the binary must import github.com/statekit/statekit/redisstate, as
// cmd/statestress and this package's tests do), and the driver also
// SIGKILLs the redis-server now and then (Redis.KillEvery) and restarts it
// on the same port and directory: appendonly yes with appendfsync always,
// so every write the server acknowledged survives. While it is down the
// workers' calls fail: a call refused before it ran (state.ErrUnavailable,
// checks.NotApplied) is left out of the history, as one that never ran; a
// call whose reply was lost (state.ErrOutcomeUnknown) stays an unknown
// outcome, never a failure. Both are noted, and a note whose call met no
// server kill or restart is reported: nothing explains it.
//
// Time: a script reads the server's TIME and returns it with its answer;
// the store reports it through hooks.NoteNow (an Update, the TIME its last
// attempt read), and the op is journalled at that time. So each op is
// journalled twice: as unknown before the call, at the server's time as
// this machine's wall clock says it (the store's own estimate for a
// server elsewhere), then with the answer and the server's time. A call
// whose answer was lost keeps that estimate, while it ran somewhere
// between its call and its end: the time its process was seen dead and
// the server had dropped its connections (a command sitting in the
// server's input buffer still runs after the client died), or, if
// earlier, the time the server was seen dead in the first restart that
// began after the client last heard of the call (its error returned, or
// its process died). A killed server stays down 50 ms before it is
// started again, so a reply lost to the kill and reported within that gap
// is bounded by the kill itself; one reported later may have been sent to
// the new server (go-redis dials again while the server restarts), and is
// bounded by the next kill. Its server time is not bounded by
// its end, though: a call that timed out on a slow server stays in the
// server's input buffer and runs later (seen: 133 ms after the client gave
// up, behind a slow fsync; 223 ms after its estimate on a loaded machine).
// What bounds it is any call made after its client gave up: the server
// reads every client with input in each turn of its event loop, so it ran
// the lost call no later than that turn. The check lets such a write take
// effect at any millisecond from 2 ms before its estimate to 100 ms after
// the least server time of the calls made once its client gave up (its
// client's next call, or its process's death)
// (linearizability.Op.NowLatest); the check tells those times apart only
// as later answers do.
//
// What stands for the file-only parts: Redis expires keys itself, so
// there is no sweep to record (no sweep observer, Work.Swept stays 0), and
// no checkpoint, high-water mark or busy timeout; the clock checks become
// one: an op that began after another returned ran at a server time at
// least as late, across restarts (the server's clock is the wall clock,
// which NTP may slew against CLOCK_MONOTONIC, so no fixed offset is
// asked); the file's Check becomes the store's (redisstate's check of
// every key's and lease's encoding), and the counters are read back from
// the server. The fenced resource stays a SQLite file. Tokens are checked
// as for the file: unique, and rising in real-time order, across restarts.
//
// Redis.NoPersistence is the negative control: a server with appendonly
// no (and allow_unsafe_leases=true in the workers' URL), which a restart
// empties, lease hashes and their tokens included. Such a run must report
// a token granted twice.
//
// # How long a run lasts
//
// A run with Config.Until stops as soon as it has done that much work
// (calls, kills, grants, grants contended between processes), whatever the
// machine's speed, and fails if Config.Duration, its cap, passes first; a
// run without it attacks for Config.Duration. A run whose context ends, or
// one of whose workers exits by itself (which is reported, and not
// started again), stops attacking at once; what ran is checked all the
// same.
package stress
