// Package state gives a Go program Redis's state verbs — Get, Set, Del,
// Incr, Decr, CAS, Expire, TTL, Lease, Renew, Release, Update transactions
// and a buffered increment — as an in-process library over one crash-safe
// SQLite file.
//
// One machine only: several goroutines and several processes on one machine
// may share a file, but a fleet of machines that shares state wants Redis,
// which Open reaches, with the same verbs and answers, given a redis:// URL
// in a program that imports github.com/statekit/statekit/redisstate.
//
// Time comes from an injectable Clock. The engine's now is the larger of the
// wall clock at Open and the file's high-water mark, advanced by the
// monotonic clock since Open; deadlines in the file are unix milliseconds.
// An expired key is absent to every verb at once, and swept later.
//
// Writes commit with synchronous=NORMAL (durable across a crash, the latest
// may roll back on power loss); lease grants are durable before they are
// answered (synchronous=FULL, or inside Update a sync of the WAL after the
// commit), so a fencing token is never handed out twice. WithSync(SyncFull)
// makes every write durable before it returns: the engine syncs the WAL
// after each commit, outside the file's write lock. CORRECTNESS.md lists every
// promise and the test that proves it.
package state
