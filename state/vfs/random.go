package vfs

import (
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// SeedSQLiteRandomness reseeds SQLite's random generator from seed; seed 0
// restores seeding from the host's entropy.
//
// SQLite draws its randomness (WAL salts, random(), randomblob()) from one
// generator per process, seeded once from the default VFS, not from the VFS
// a database was opened through: Entropy alone cannot make a run's bytes
// reproducible. A simulator calls this at the start of each run, and runs
// one simulation at a time per process: the generator is process-wide, so
// any other SQLite use in the process shifts the sequence.
func SeedSQLiteRandomness(seed uint32) {
	tls := libc.NewTLS()
	defer tls.Close()
	va := libc.NewVaList(int32(seed), uintptr(0)) // (int seed, sqlite3 *db)
	defer libc.Xfree(tls, va)
	sqlite3.Xsqlite3_test_control(tls, sqlite3.SQLITE_TESTCTRL_PRNG_SEED, va)
}
