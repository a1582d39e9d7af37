// Package redisstate makes state.Open accept Redis URLs: a program that
// imports it (as _ "github.com/statekit/statekit/redisstate", the
// database/sql driver pattern) gets the statekit verbs, with the same
// answers and errors as on a file, over a Redis server or cluster:
//
//	db, err := state.Open("redis://:secret@127.0.0.1:6379/0?prefix=app:")
//
// # URLs
//
//	redis://[[user]:password@]host[:port][/db][?param=value&...]
//	rediss://...                    the same over TLS, as redis-cli --tls
//	redis+cluster://[[user]:password@]host1:port1,host2:port2[/][?...]
//
// User and password are read as redis-cli reads them: redis://:pw@host and
// redis://user:pw@host, and redis://pw@host (no colon) is the password
// alone. /N selects database N (0 when absent; a cluster has only 0). The
// cluster's seed addresses are the comma-separated hosts, and addr=host:port
// parameters add more; every master is found from them. TLS to a cluster
// (a rediss+cluster:// scheme) is not provided.
//
// Parameters of this package, stripped before go-redis reads the rest:
//
//	prefix=P                 every Redis key of the store starts with P
//	                         (default "": the store's keys are k:... and
//	                         lease:... at the top of the database). The
//	                         prefixes of stores sharing a database must
//	                         not nest: with "" and "k:", the second
//	                         store's lease hash k:lease:N is the first
//	                         one's key "lease:N". The verbs refuse to
//	                         overwrite or delete a key of another Redis
//	                         type (state.ErrCorrupt), so a lease's hash
//	                         keeps its token; a Set inside Update, which
//	                         reads nothing first, is not checked.
//	allow_unsafe_leases=true grant leases on a server that may lose an
//	                         acknowledged write (see Leases below); it
//	                         does not lift WithSync(SyncFull)'s check
//	wait_replicas=N          after each lease grant, wait (Redis WAIT, up
//	                         to 1 s or the context's deadline) until N
//	                         replicas have it (see Leases below)
//
// Every other parameter is go-redis's (dial_timeout, read_timeout,
// write_timeout, pool_size, client_name, protocol, skip_verify, ...; see
// redis.ParseURL), except max_retries, min_retry_backoff and
// max_retry_backoff, which are refused: the store never resends a command
// whose outcome is unknown, since a resent increment could count twice.
// Numeric parameters are checked at Open: pool_size from 1, the other
// connection counts from 0, to 65535; protocol 2 or 3; every duration
// (dial_timeout, read_timeout, write_timeout, pool_timeout, ...) above 0,
// since go-redis reads 0 or less as no timeout at all. An unknown
// parameter, a value out of range, a malformed URL, a port outside 1-65535,
// a bad database number or a db= parameter that disagrees with the path
// fails Open with state.ErrInvalidArgument naming the cause. Errors never
// contain the password; one holding a '/', '?' or '#' must be
// percent-encoded (%2F, %3F, %23), and Open refuses it otherwise, since a
// URL parser would read the rest of it as the path or the query.
//
// go-redis logs some failures itself (a dial that failed after its retries)
// through its process-wide logger, on stderr by default; statekit leaves
// that logger alone, as it belongs to the program: redis.SetLogger
// silences or redirects it. Each such failure also reaches the caller as
// the verb's error.
//
// Open connects and PINGs every server within dial_timeout (5 s by
// default): an unreachable server or a refused password fails Open with
// state.ErrUnavailable wrapping the client's error, which names the address.
//
// # Encoding
//
// Keys stay readable in redis-cli. With prefix P:
//
//	key K          the Redis string  P + "k:" + K
//	its value      "i:" + decimal for an integer ("i:-42"),
//	               "b:" + the raw bytes for bytes ("b:hello"),
//	               so integer 7 ("i:7") and bytes "7" ("b:7") stay apart
//	its deadline   the key's native Redis expiry (PEXPIREAT / PXAT), so
//	               PTTL shows it and Redis deletes the key itself
//	lease name N   the Redis hash    P + "lease:" + N with the fields
//	               owner    the holder, or the last holder once free
//	               token    the fencing token, decimal, at least 1
//	               expires  ms since the epoch (server clock); 0 once
//	                        released
//
// A lease hash is never deleted and never given a Redis TTL, so the next
// grant of a name always sees the last token and hands out token+1.
// Check reports values without a valid tag, damaged lease hashes, and
// keys of another Redis type under the store's prefix. A lease hash is
// damaged when a field is missing, the owner is empty, the token is not a
// decimal integer of at least 1 as statekit writes it, or expires is not 1
// to 15 decimal digits. Every verb reads a hash by these same rules: Lease,
// Renew and Release, inside Update too, return state.ErrCorrupt naming the
// lease and leave the hash as it is, and Leases returns ErrCorrupt.
//
// A value another client wrote under the prefix without a tag (with prefix
// app:, redis-cli SET app:k:hits 12) is not read as an integer or as
// bytes: Get, Incr, Scan and a transaction's read of it return
// state.ErrCorrupt naming the key, IncrBuffered's Flush drops its delta with
// ErrCorrupt, and CAS finds it equal to no expected value; Set, Del and
// Expire replace, delete or time it as any key. Unlike a file's, such an
// ErrCorrupt does not end the handle: the other keys go on.
//
// # Atomicity and time
//
// Every verb on one key (Set, IncrBy, CAS, Expire, TTL, Lease, Renew,
// Release) is one Lua script (scripts/*.lua), loaded once per server and
// run by its SHA: it runs whole or not at all, with no gap between an
// increment and its expiry. Get, which writes nothing, is TIME, GET and
// PEXPIRETIME in one MULTI/EXEC: as atomic, and cheaper than a script. Integers never pass through Lua's doubles:
// the scripts add int64s as decimal halves and report ErrOverflow exactly
// at the int64 bounds. Del of several keys and Flush are one script on one
// server; in a cluster, one script per hash slot, so keys in different
// slots are not deleted or flushed atomically together. A flush whose
// script on one master fails after another's ran answers key by key: the
// keys of a script that surely did not run are kept for the next flush
// (state.FlushError's Kept), those of one that may have run are dropped.
// A Del that fails on one slot after another slot's keys were deleted
// answers state.ErrOutcomeUnknown naming the keys deleted and not.
//
// In a cluster a verb follows the slot's redirects: after MOVED it reloads
// the slot map and runs on the master it names; after ASK (its key's slot
// is migrating and the key is not on the old master) it is sent, after
// ASKING, to the importing master the reply names, even one just added to
// the cluster that owns no slot yet, which no slot map names (the store
// makes its own client of it). A redirect still met
// after 8 sends, and TRYAGAIN, mean nothing ran: state.ErrUnavailable
// naming the slot, and a flush keeps those deltas. An Update runs only on
// the master that owns its slot, never after ASKING: while its slot
// migrates (or the map is reloaded after MOVED), an attempt that meets a
// redirect has applied nothing, and Update waits for the slot to settle,
// attempt after attempt with pauses of 5 to 100 ms, then runs on the
// slot's owner. It waits up to the handle's busy timeout in all
// (state.WithBusyTimeout, state.DefaultBusyTimeout unless set; zero never
// waits) or until its context ends, and then fails with state.ErrUnavailable
// saying the slot was still migrating, or with the context's error; the
// attempts a redirect stopped do not count among its 32.
// Requires Redis 6.2 or later (SET ... PXAT, KEEPTTL).
//
// Deadlines are absolute times of the Redis server's clock: each script
// reads TIME and writes now+ttl, so every client agrees whatever its own
// clock says. A key is live while its deadline is after the script's now,
// as in the file engine: the scripts compare the key's deadline
// (PEXPIRETIME) with their own TIME, since Redis itself keeps a key
// through its deadline's millisecond and counts PTTL from a clock reading
// of its own, a moment after the script's TIME. TTL is the deadline less
// that TIME, and so is a held lease's Left; every answer holds at the
// time the script reports with it. Del and Flush look at the type of each
// of their keys before they write, so a key of another Redis type never
// stops them halfway (Del fails whole; Flush drops that key's delta). A clock step on the
// Redis host moves every deadline at once: a step forward expires keys
// and leases early, a step back extends them. Fencing tokens never go back
// whatever the clock does. DB.Now is the server's TIME read at Open,
// advanced by this process's monotonic clock and moved forward (never
// back) by the time each script reports.
//
// # Transactions
//
// Update is optimistic. Each attempt runs on a connection of its own;
// every read WATCHes its key and reads the value and its deadline (or the
// lease hash) in one round trip, and the transaction keeps an overlay, so
// the callback reads its own writes and gets the answers the file engine
// would give at one server time, the transaction's now: the TIME of its
// first read. A later read runs at a later TIME, which Redis's own expiry
// follows: a key found absent then may have expired after now, so now
// moves forward to that read when no answer given so far depends on the
// exact now (a TTL of a deadline read from the server, a lease granted,
// renewed or released, a LeaseHeldError) and every key read live is still
// live then; otherwise the attempt starts over at once, reading the keys
// the attempt before it read first. Deadlines the
// transaction writes are counted from its final now. A key that expires
// after it was read makes EXEC fail, as a write to it would. Writes are sent in one
// MULTI/EXEC only when the callback returns nil. When a watched key changed
// meanwhile, EXEC applies nothing and the callback runs again, so it may
// run more than once: up to 32 attempts, with a short jittered pause,
// then state.ErrBusy. Each read is a round trip of its own, so a callback
// may see keys of two states (another writer committed between its
// reads); an attempt that writes nothing (the callback returned an error,
// or wrote nothing) therefore ends with an empty MULTI/EXEC that checks
// its watches, and runs again when one changed. So Update returns the
// callback's error, or nil, only when what the callback read held at one
// moment, as on a file. A connection lost around EXEC is
// state.ErrOutcomeUnknown. In a cluster, every key and lease name a
// transaction touches must hash to one slot: give them a hash tag, as
// {user42}:balance and {user42}:history; otherwise the verb fails with
// state.ErrInvalidArgument and so does Update. (A prefix with a hash tag,
// as prefix={app}:, puts the whole store in one slot.)
//
// # Leases and durability
//
// A fencing token must never be handed out twice. One Redis server with
// appendonly yes and appendfsync always writes every grant to its
// append-only file and fsyncs it before it replies, so a crash or restart
// never forgets a token it acknowledged. A server that evicts keys to make
// room (a maxmemory limit and a maxmemory-policy other than noeviction)
// may evict a lease's hash, and then grant its token again, or a held
// lease to another owner. Lease (and a lease inside Update) therefore
// checks, with CONFIG GET, that every server of the store has appendonly
// yes, appendfsync always, and maxmemory 0 or maxmemory-policy noeviction,
// and otherwise fails with state.ErrNotDurable saying why and how to opt
// out; where CONFIG is refused or renamed, it says the durability cannot
// be verified (a server that refuses every command for now, such as one
// whose password changed, is state.ErrUnavailable, as for any verb). A
// passed check holds until the store opens a connection: a
// server restarted with appendonly no loaded no append-only file and would
// grant token 1 again, so a grant sent over a connection opened since the
// check is checked again (before EXEC in Update; after the script for
// Lease, whose answer is then not given: ErrNotDurable and
// ErrOutcomeUnknown, since the grant may stand on the server). A grant
// (or a SyncFull write) that ASK sends to an importing master outside the
// slot map is checked on that master before it is sent there, and after
// it as above. The URL parameter
// allow_unsafe_leases=true skips the check: tokens may then repeat after a
// crash or an eviction. The check cannot see a server whose settings are
// changed with CONFIG SET, without a restart, after it. Nor can anything
// keep a token from repeating when another client deletes lease hashes
// (FLUSHALL, FLUSHDB, DEL of the store's keys): the holder's next Renew is
// state.ErrLeaseLost, and the lease's next grant is token 1 again. Give
// the store a database or a prefix no one else deletes.
//
// On a store opened with state.WithSync(state.SyncFull), which promises
// that every answered write survives a crash, every write verb makes the
// same check: Set, Del, the Incr and Decr family, CAS, Expire, Lease,
// Renew, Release, an Update whose callback wrote (before its EXEC), and
// Flush of IncrBuffered's increments (which are kept for the next Flush
// when it is refused). Each fails with state.ErrNotDurable, and writes
// nothing, on a server with appendfsync everysec (Redis's default), with
// appendonly no, or that may evict, naming the setting; reads (Get, TTL, Scan, Leases, Stats, Check, an
// Update that sends no write) are not checked. A write sent over a
// connection opened since the last check is checked again after its
// script, as a grant is; when that fails it is state.ErrOutcomeUnknown
// (with ErrNotDurable when the server may lose it): the write ran, and
// a retry of an increment could count it twice. allow_unsafe_leases=true
// does not lift this check, and with SyncFull a grant is checked even
// when the URL says it: the parameter accepts repeated fencing tokens, and
// the program, not the URL, asked for every write to be kept; to write
// on such a server, open without SyncFull.
//
// Without SyncFull the other verbs do not check: on a server that evicts,
// a key may vanish before its deadline (with an allkeys-* policy any key,
// with a volatile-* policy a key with a TTL), which the file engine never does, and Get then
// finds it absent as if it had been deleted. Run a store whose keys must
// last to their deadline on a server with maxmemory-policy noeviction: a
// write past maxmemory then fails with state.ErrUnavailable (the server's
// OOM reply) and nothing is lost, while reads go on (Get, whose
// transaction such a server refuses, reads through a script then).
//
// Replicas do not make grants safer by themselves: Redis replicates
// asynchronously, so a failover can promote a replica that never saw the
// newest grant, which the new master then hands out again. With
// wait_replicas=N, a grant (by Lease, or by a lease inside Update) is
// followed by WAIT N on the same connection, and unless N replicas
// acknowledged it within 1 s (or by the context's deadline) the call
// fails with state.ErrOutcomeUnknown: the master granted it, a failover
// could lose it, and a retry by the same owner is safe (it gets the same
// token). WAIT narrows the window but is not consensus: a failover to a
// replica that did not acknowledge remains possible, so a deployment that
// needs tokens never to repeat across failovers also wants the failover
// to pick the most up-to-date replica. In a cluster the same holds per
// master: each lease lives on the master of its slot.
//
// # Errors
//
// A server that cannot be reached, refuses the connection or the
// credentials, or is loading gives state.ErrUnavailable: nothing was
// applied. Every error of a server names its address; in a cluster, the
// master that replied or failed (host:port), not the URL's list of seeds,
// which an error names only when no one master is concerned (the slot map
// could not be loaded). A connection that fails after a command that writes was sent
// gives state.ErrOutcomeUnknown: the script may or may not have run (it
// runs whole or not at all). When the caller's context ends, the error
// wraps the context's error (errors.Is(err, context.DeadlineExceeded)),
// and ErrOutcomeUnknown too when a write was in flight: every verb returns
// by the context's deadline. A context cancelled without its deadline
// having passed does not cut short a command already sent to a server that
// does not answer (one stopped, say): the verb returns when the client's
// read timeout ends it, seconds later. A key of another Redis type under the
// prefix is state.ErrCorrupt. Close waits for the verbs in flight on
// other goroutines, as a file's Close does, so a write already sent gets
// its answer; a verb that starts once Close has begun gets
// state.ErrClosed. It does not wait for a Scan or Leases, whose callback
// may call Close.
//
// # What differs from a file
//
// Sweep returns 0 (or its context's error): Redis deletes expired keys
// itself. Scan with
// includeExpired cannot report expired keys, which Redis no longer
// returns; Stats counts keys and leases with SCAN (ExpiredKeys and the
// file's fields stay zero, Now and Wall are the server's time). Scan,
// Leases, Stats and Check list keys with SCAN and then read them in pages:
// like the file engine's Scan, none of them is a snapshot. In a cluster a
// listing sees every key that exists while it runs even when its slot
// moves meanwhile: it asks every master for its slots (CLUSTER NODES, and
// INFO commandstats for the keys MIGRATE brought it) before and after
// SCANning them all, and lists each slot that migrated or changed owner in
// between again on its own (CLUSTER GETKEYSINSLOT, on the slot's owners
// first, then on the masters importing it), until a read finds the slot's
// state unchanged around it. Keys that came to a master that gained no
// slot, or a config epoch raised without a slot gained (a slot that moved
// away and came back), make it SCAN again. A master the store's slot map
// does not name yet (one just added to the cluster) is listed too. A slot
// that keeps changing for the busy timeout fails the listing with state.ErrUnavailable
// naming it, and so does a page whose key's slot keeps moving as it is
// read. It costs a listing one more round trip to every master before its
// SCANs and one after (about 1 ms on a local three-master cluster). A user
// whose ACL refuses CLUSTER NODES lists with the SCANs alone, which may
// miss a key whose slot moved while they ran. A read a master refuses
// (CLUSTERDOWN, LOADING) fails the listing with state.ErrUnavailable; only
// WRONGTYPE is damage.
package redisstate
