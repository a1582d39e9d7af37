// Package sim is statekit's deterministic simulator: one seed builds a
// simulated machine (a faults.MemFS disk, a true virtual time, a wall clock
// that steps) with one to eight processes, each a state.DB over the same
// file opened with the engine's defaults (group commit, and the background
// sweeper, flusher and checkpointer), each running several client
// goroutines that call every verb on a few shared keys and two leases,
// while the simulator cuts the power, crashes, pauses and restarts
// processes, steps the wall clock, fails reads, writes, syncs and
// directory syncs, and fills the disk. statectl visits too (inspect.go): a
// process of its own opens the live file without background work, reads a
// few keys, lists them (dump, leases), counts them (info) or checks the
// file (read-only) or writes a few (set, incr, decr, del, expire, cas,
// sweep, run's lease), and closes. With Rates.Foreign, another program comes too (foreign.go):
// plain SQLite switches the file to a rollback journal mode while no
// process has it open, or writes in WAL mode beside the processes, and is
// killed in its write before its commit; or it keeps a read snapshot in
// WAL mode beside them, and ends its read or is killed.
//
// Goroutines are real, and one runs at a time (sched.go): a seeded
// scheduler hands the turn to one and takes it back at every point where
// interleaving matters: the handle's lock, the group-commit queue, the
// background goroutines' waits (through internal/hooks and the clock's
// state.Sleeper), and every file and lock call, SQLite's and the
// engine's own beside it (the disk is a vfs.Yielder). SQLite's busy waits sleep virtual time. A crash or power
// loss freezes a process's goroutines where they stand; what they had in
// flight is of unknown outcome, unless it changed nothing: it was cut
// before the engine claimed its time (under the engine's lock, before any
// statement of it), or the process wrote nothing from the call on
// (faults.MemFS.WritesBy; every change reaches the file through its own
// process's writes). Such a call is left out of the history, as a call
// that failed with an error is on the same terms. After the run, a teardown lets the frozen goroutines finish and
// closes their handles, recording nothing.
//
// After each power loss the simulator reads, on a copy of the disk, the
// rows the clients' keys and leases recovered to, and records them on the
// PowerLoss event (recovered.go): the linearizability check holds each key
// to its row. The copy keeps the run itself unchanged.
//
// After the run every check runs, whatever faults were injected:
// linearizability of the whole history against package model (with the
// durability model for power losses), fencing tokens and the fenced
// resource, the engine's clock promises, integrity_check after every
// recovery, the counter's bounds, that each flush takes exactly what was
// buffered, that each Flush and Close returns the errors of the background
// flushes that lost deltas before it, once, beside its own flush's outcome
// (flushanswer.go), that each Sweep returns how many keys its own sweep
// transactions deleted, that statectl info counts the rows the verifier lists
// at the end (info.go), that every snapshot of the transfer pair sums to
// zero (transfer.go: Updates are atomic), and that no error appeared that
// no fault explains. The key group's three keys share a hash tag
// (groupkeys.go), so linearizability checks them as one partition: every
// Del's count over them, not only a count of none or all. Run returns
// a Report; its Trace hashes everything that happened, scheduling steps
// included, so one seed replays byte for byte.
//
// Everything random comes from Config.Seed, one math/rand/v2 stream per
// subsystem; nothing reads the real clock, nothing iterates a map to
// decide, and no goroutine runs without the turn. SQLite's own random
// generator is process-wide: Run reseeds it, and runs must not overlap in
// one OS process (cmd/statesim runs seeds in parallel in worker processes).
// SQLite's page cache is process-wide too: a connection left open beside
// a run changes when the run's connections spill pages (the foreign
// program's do), so a test closes every handle it opens.
package sim
