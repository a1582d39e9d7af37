// Package ratelimit is rate limiting over a statekit file: a fixed window,
// a sliding window and a token bucket (GCRA), each exact across the
// goroutines and processes that share one *state.DB file, and an
// http.Handler middleware that answers 429 with Retry-After and the
// RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset fields.
//
// Every limiter has one small interface, Limiter: Allow(ctx, key) and
// AllowN(ctx, key, n) return a Decision (allowed, remaining, how long until
// the next request would be allowed, how long until the quota is whole
// again). Each decision is one atomic step in the file:
//
//   - FixedWindow: one Incr with a TTL on a key that names the window's
//     index. N processes firing at one key are allowed exactly the limit per
//     window.
//   - SlidingWindow: the weighted two-window count (the previous window's
//     count weighted by how much of it the sliding window still covers, plus
//     the current one), read and written back in one Update.
//   - TokenBucket: GCRA, the bucket as one integer (its theoretical arrival
//     time), read and written back in one Update; a refused request writes
//     nothing.
//
// Time is the engine's, never time.Now: a decision in an Update reads its
// transaction's time (state.Tx.Now), the time its verbs run at, so one that
// runs late (behind the file's lock, in a paused process) is placed by when
// it ran; a fixed window's single Incr is placed by db.Now just before it,
// and decided again in an Update if it returned so late that its window's
// count may have expired before it ran. So a file opened with
// state.WithClock(faults.NewClock(...)) gives decisions a test can step by
// hand. Processes sharing a file each have their own engine clock, which
// agree to within the high-water mark's lead (state.HighWaterLead) and
// usually to a few milliseconds: near a window's edge two processes may
// count a request in different windows, as they would on two clocks of one
// Redis client fleet.
//
// Bad configuration (a limit or window of zero or less, a window under a
// millisecond or over 50 years, a rate too fast to express in nanoseconds, a
// burst that takes over 50 years to refill or holds less than a millisecond
// of its rate, which the engine's whole milliseconds would slow, a prefix
// that is not text or leaves no room) and
// bad requests (a key that is empty, not UTF-8, holds NUL, or is too long
// to store under the limiter's prefix; a request of n outside 1..limit, or
// 1..burst for the bucket) are errors naming the cause, at construction or
// at the call: never a limiter that allows everything.
//
// A file serves the processes of one machine. The limiters use nothing but
// the verbs, so a *state.DB opened on a Redis URL (with package redisstate
// imported) makes them exact across the processes, and machines, that share
// that server; there an Update's callback may run more than once, and a
// limiter keeps only its last run's answer. In a Redis Cluster
// (redis+cluster://) a transaction's keys must share a hash slot, and a
// sliding window reads two windows' keys in one: give the limiter's keys one
// hash tag, in the store's prefix (prefix={rl}:) or in each key
// ({client-42}), or its decisions fail with state.ErrInvalidArgument naming
// the two slots. A window limiter reads its counts before it asks for its
// transaction's time, which a cluster's transaction has only once it has
// touched a key.
package ratelimit
