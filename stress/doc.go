// Package stress attacks statekit's real path: several OS processes share
// one state file on disk through SQLite's native VFS, run every verb on a
// small key space, and hold leases that guard a fenced resource, while a
// driver kills random workers with SIGKILL in the middle of their calls and
// restarts them.
//
// Each worker is this binary re-executed (see WorkerMain). It journals every
// call twice, with Unknown set before the call and with the answer after it,
// with call and return times from CLOCK_MONOTONIC, which every process on
// the machine shares; a killed worker's open call stays unknown, bounded by
// the time the driver saw the process dead. When the run ends, Run checks:
//
//   - the whole history with package linearizability (porcupine over
//     package model, partitioned by key);
//   - fencing tokens: no token granted to two owners, a grant that starts
//     after another returned never gets a lower token, and the fenced
//     resource accepted each token from one holder only, in order;
//   - counters: every +1 that returned is counted exactly, each returned a
//     different value, and the final value lies within the unknown ones;
//   - the file: state.DB.Check (SQLite's integrity_check and statekit's
//     invariants) finds nothing, and the resource passes integrity_check.
//
// # Time
//
// A verb's answer depends on the engine's now (deadlines, TTLs, lease
// expiry), and porcupine compares answers exactly, so each recorded call
// carries the exact now the engine used. Workers open the file with a clock
// whose monotonic reading moves only between calls: the worker reads the
// operating system's monotonic clock, records db.Now(), and the call that
// follows uses that same now. Wall time at open, the file's high-water
// mark and everything else are as in production. The processes' engine
// clocks still disagree with each other (each starts from the wall clock or
// the high-water mark at its open); the checks need no agreement, since
// every answer is compared with the model at its own process's now, and
// Report.ClockSpread says how far apart they were.
//
// The key space is tiny, and changes every Config.EpochEvery: a key's
// history stays short however long the run, since porcupine's time and
// memory grow faster than the history of one key.
//
// Workers run WithoutBackground: a sweep nobody recorded, made at one
// process's now, would delete a key that another process's now still
// counts live, which the checker cannot tell from a lost write. Workers
// sweep as a recorded verb instead; SQLite checkpoints on the main
// connection.
package stress
