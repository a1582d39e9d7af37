package redisstate

import (
	"errors"

	"github.com/redis/go-redis/v9"
)

// Checking what a transaction read. Each read of a transaction is a round
// trip of its own, WATCHing its key, so another writer can commit between
// two of them: the callback may then have seen a state no single moment
// held. A commit finds that out (EXEC applies nothing when a watched key
// changed, and the attempt runs again), but an attempt that sends no
// writes has no EXEC of its own: a callback that returned an error, or
// one that wrote nothing. Such an attempt asks with checkWatches before
// Update returns what the callback said.

// checkWatches sends MULTI and an empty EXEC, in one round trip, when the
// transaction WATCHes keys it read. EXEC answers nil when one of them
// changed (or expired) since its read: checkWatches then returns errRetry,
// and the attempt runs again. A failure of the connection is the
// transaction's (cmdErr).
func (t *tx) checkWatches() error {
	if t.conn == nil || len(t.asked) == 0 && len(t.leases) == 0 {
		return nil // nothing read, nothing watched
	}
	var multi, exec *redis.Cmd
	// Pipelined's own error is the first of the commands': each is
	// read below, MULTI's first (EXEC fails too when MULTI did).
	_, _ = t.conn.Pipelined(t.ctx, func(p redis.Pipeliner) error {
		multi = p.Do(t.ctx, "MULTI")
		exec = p.Do(t.ctx, "EXEC")
		return nil
	})
	err := multi.Err()
	if err == nil {
		err = exec.Err()
	}
	if err == nil || errors.Is(err, redis.Nil) {
		t.execd = true // EXEC answered, and cleared every WATCH
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redis.Nil):
		return t.fail(errRetry)
	}
	return t.cmdErr(err)
}

// writesNothing reports whether the transaction has nothing to send at
// its commit: no key and no lease written.
func (t *tx) writesNothing() bool {
	if len(t.order) > 0 {
		return false
	}
	for _, ls := range t.leases {
		if ls.dirty {
			return false
		}
	}
	return true
}
