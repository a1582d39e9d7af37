// Package cache is a read-through cache over a statekit file with one fill
// at a time: GetOrCompute returns a key's live value or, on a miss, lets one
// caller compute it while the others wait for that caller's value.
//
// The caller that computes holds a short lease on the key, with its fencing
// token; it writes the value in one Update that first releases that lease,
// token and all, so a caller whose lease lapsed mid-compute (it paused, or
// the computation outran the lease) writes nothing, and a newer holder's
// value stands. The others wait by polling the file, for the value or for
// the lease to lapse (then one of them takes over), for at most a bounded
// time on the engine's clock. Goroutines and processes sharing the file
// share the fill: a cold key costs one computation, not one per caller. The
// same holds for the processes sharing a Redis server, for a *state.DB
// opened on a Redis URL (package redisstate), if the server keeps every
// acknowledged write and evicts nothing, as a lease's fencing token needs:
// on one that may lose a write (appendonly no) or evict keys (a maxmemory
// policy other than noeviction, as cache servers often run), Lease refuses
// with state.ErrNotDurable, so every miss does, before computing, unless
// the URL accepts the risk with allow_unsafe_leases=true. In a Redis
// Cluster (redis+cluster://) the Update that writes the value releases the
// lease "cache:KEY" too, so the two must share a hash slot: give the key a
// hash tag ("{report}:daily") or the store one (prefix={app}:); without one
// the fill fails with state.ErrInvalidArgument naming the slots, after fn
// ran, and writes nothing.
//
// Values are bytes; the caller encodes and decodes them. A value expires ttl
// after it was written; expiry is the engine's (an expired value is absent
// to every reader at once).
//
// A Del of a key does not stop a fill of it already running: the fill is
// fenced against losing its lease, not against a Del. A fill that began
// before a Del (its fn read the source before the app changed it) writes
// the value it computed after the Del, and that value is served for its
// whole ttl (TestDelDuringAFillDoesNotStopIt). So a Del is no
// invalidation to count on while fills may run: where a value must not
// outlive a change of its source for long, give it a ttl as short as that,
// or put a version of the source in the key ("report:v42", the version
// bumped with the source), so that a change is a new key, a miss, and a
// fill of the old key is never read for the new version.
package cache
