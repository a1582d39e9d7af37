// Package faults holds the simulated twins of the outside world that
// statekit's simulator drives: MemFS, the disk of one simulated machine, which
// loses unsynced writes on a power loss (drop, keep, or tear per 512-byte
// sector, seeded) and the creations and deletions of files whose directory
// was not synced, fails reads, writes and syncs (of files and of
// directories) on demand, fills up, and serves each simulated process
// through its own view (a vfs.FS) that dies with the process; and the
// clocks.
//
// Everything random in the package comes from seeds: one seed, one run.
package faults
