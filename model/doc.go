// Package model is the sequential specification of every statekit verb: a
// pure function Step(State, Input) -> (State, Output), with time an input
// (Input.NowMillis, unix milliseconds, at or after 0, as are the deadlines
// now+ttl the rules below make: a TTL whose deadline would pass the int64
// range is outside the model; the engine caps TTLs far below it). The
// engine (package state) implements
// the same rules over SQLite; the linearizability checker and the engine's
// model-based tests compare the two.
//
// The rules, which the engine implements identically:
//
//   - A Value is an integer or bytes; int 7 and bytes "7" differ.
//   - A key row holds a Value and a deadline ExpiresAt (unix ms, 0 = none).
//     It is live iff ExpiresAt == 0 || ExpiresAt > now. An expired row is
//     absent to every verb at once; only Set, IncrBy, CAS, Expire (ttl <= 0),
//     Del and Sweep remove or replace it, never a read.
//   - Get: live -> its value, else ErrNotFound.
//   - Set: replaces value and type; deadline now+ttl if ttl > 0, else none.
//   - Del: deletes every listed key; N = distinct keys that were live.
//   - IncrBy: absent or expired -> created with value delta and deadline
//     now+ttl if ttl > 0. Live integer -> value+delta, deadline unchanged,
//     ttl ignored. Live bytes -> ErrNotInteger; a result outside int64 ->
//     ErrOverflow; both leave the state unchanged. Int = the new value.
//     Incr, Decr and DecrBy(d) are IncrBy with +1, -1 and -d.
//   - CAS: matches iff (Expected == nil and the key is not live) or
//     (Expected != nil and the key is live and its value == *Expected). On a
//     match New == nil deletes a live key, else sets New, keeping the deadline
//     of a live key (an absent key gets none), or, with ttl > 0, giving it
//     the deadline now+ttl. OK = matched.
//   - Expire: ttl <= 0 deletes the key, OK = it was live. ttl > 0: live ->
//     deadline now+ttl, OK; absent -> OK false, nothing changes.
//   - TTL: absent -> ErrNotFound; no deadline -> NoExpiry; else deadline-now.
//   - Lease rows {Owner, Token, ExpiresAt} are never deleted; a lease is live
//     iff ExpiresAt > now (0 = released). Lease: no row -> token 1; row not
//     live -> token+1; live and same owner -> same token; each of those sets
//     the owner and deadline now+ttl. Live with another owner ->
//     ErrLeaseHeld (Owner and ExpiresAt name the holder), unchanged.
//   - Renew: live, same token and owner -> deadline now+ttl; else
//     ErrLeaseLost. Release: live, same token and owner -> ExpiresAt 0, token
//     kept; else ErrLeaseLost. Neither changes the token.
//   - Sweep: deletes every expired key row (never a lease); N = how many.
//   - Scan: the key rows whose key starts with the prefix, in byte order of
//     the keys, each with its value and deadline: the live ones, and with
//     All also the expired rows not yet deleted. Leases: the lease rows
//     whose name starts with the prefix, in byte order of the names: the
//     live ones, and with All every row. Both only read.
//   - Update: the sub-inputs in order at the Update's now; the first whose
//     Err is neither ErrNone nor ErrNotFound aborts: state unchanged,
//     Err = that error. Abort=true models a callback that returns its own
//     error after its verbs: state unchanged, Err = ErrAborted.
//   - Flush: the IncrBy sub-inputs of a buffered-increment flush, each
//     applied on its own: one that fails leaves its key unchanged and the
//     others still apply. Err is ErrNone.
//   - Leases and keys are separate namespaces.
//   - Bad input (a key or lease name empty, over 1 KiB, not UTF-8 or
//     holding NUL; a lease owner empty or over 1 KiB; a Set value, or a CAS
//     Expected or New, of bytes over 1 MiB; a CAS with ttl > 0 and a nil
//     New; a Lease or Renew ttl <= 0; a
//     nested Update, Flush, Sweep, Scan or Leases; a Flush sub-input that is not IncrBy)
//     gives ErrInvalid and changes nothing.
package model
