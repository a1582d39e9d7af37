// Package sim is statekit's deterministic simulator: one seed builds a
// simulated machine (a faults.MemFS disk, a true virtual time, a wall clock
// that steps) with one to eight processes, each a state.DB over the same
// file, whose clients call every verb on a few shared keys and two leases,
// while the simulator cuts the power, crashes, pauses and restarts
// processes, steps the wall clock, fails reads, writes and syncs, and fills
// the disk. Background work (Sweep, buffered Flush) runs when the simulator
// says.
//
// After the run every check runs, whatever faults were injected:
// linearizability of the whole history against package model (with the
// durability model for power losses), fencing tokens, the engine's clock
// promises, integrity_check after every recovery, the counter's bounds, and
// that no error appeared that no fault explains. Run returns a Report; its
// Trace hashes everything that happened, so one seed replays byte for byte.
//
// Everything random comes from Config.Seed, one math/rand/v2 stream per
// subsystem; nothing reads the real clock, and no goroutine races: a call
// runs to its end before the next begins, so no lock is ever held between
// steps. SQLite's own random generator is process-wide: Run reseeds it, and
// runs must not overlap in one OS process (cmd/statesim runs seeds in
// parallel in worker processes).
package sim
