package state

// The planted bugs (internal/bugs): wrong on purpose, compiled in, off
// unless the internal hooks (hooks.Engine.Bugs) turn them on. The simulator
// and the stress test must catch each one; nothing else may use them.

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/statekit/statekit/internal/bugs"
)

const (
	bugGetAnySQL    = `SELECT value FROM kv WHERE key = ?1 AND ?2 IS NOT NULL`
	bugRenewBumpSQL = `UPDATE leases SET expires_at = ?4, token = token + 1
WHERE name = ?1 AND owner = ?2 AND token = ?3 AND expires_at > ?5 RETURNING token`
	bugReleaseDeleteSQL = `DELETE FROM leases WHERE name = ?1 AND owner = ?2 AND token = ?3 AND expires_at > ?4 RETURNING 1`
	bugCASTextSQL       = `UPDATE kv SET value = ?3
WHERE key = ?1 AND CAST(value AS TEXT) = CAST(?2 AS TEXT) AND (expires_at IS NULL OR expires_at > ?4)
RETURNING 1`
	// bugIncrPlainSQL checks type and range as incrSQL does, so that the
	// only thing wrong is the second statement.
	bugIncrPlainSQL = `INSERT INTO kv(key, value, expires_at) VALUES (?1, ?2, NULL)
ON CONFLICT(key) DO UPDATE SET value = CASE
	WHEN kv.expires_at IS NOT NULL AND kv.expires_at <= ?3 THEN ?2
	WHEN typeof(kv.value) <> 'integer' THEN statekit_raise('` + raiseNotInteger + `')
	WHEN kv.value < ?4 OR kv.value > ?5 THEN statekit_raise('` + raiseOverflow + `')
	ELSE kv.value + ?2 END,
	expires_at = CASE WHEN kv.expires_at IS NOT NULL AND kv.expires_at <= ?3 THEN NULL ELSE kv.expires_at END
RETURNING value`
	bugIncrExpireSQL  = `UPDATE kv SET expires_at = ?2 WHERE key = ?1`
	bugLeaseInsertSQL = `INSERT OR REPLACE INTO leases(name, owner, token, expires_at) VALUES (?1, ?2, ?3, ?4)`
	// bugDelAllSQL counts every row a Del of several keys deletes as live
	// (?2, the time, is unused).
	bugDelAllSQL = `DELETE FROM kv WHERE key IN (SELECT value FROM json_each(?1)) RETURNING 1 OR ?2`
)

// bugIncrTwoStatements is the classic rate-limiter bug: INCR, then EXPIRE
// when the result says the key was just created, as two statements.
func (db *DB) bugIncrTwoStatements(ctx context.Context, now int64, key string, delta, ttl int64) (int64, error) {
	var n int64
	lo, hi := incrBounds(delta)
	if err := db.st.bugIncrPlain.QueryRowContext(ctx, key, delta, now, lo, hi).Scan(&n); err != nil {
		return 0, classify(ctx, err)
	}
	if ttl > 0 && n == delta {
		if _, err := db.st.bugIncrExpire.ExecContext(ctx, key, now+ttl); err != nil {
			return 0, classify(ctx, err)
		}
	}
	return n, nil
}

// bugCASIgnoresType compares values as text, so int 7 matches "7", in a
// swap without a TTL (a CAS that deletes compares as the engine does).
func (db *DB) bugCASIgnoresType(ctx context.Context, now int64, key string, exp Value, nv *Value) (bool, error) {
	var one int
	err := db.st.bugCASText.QueryRowContext(ctx, key, exp.sqlArg(), nv.sqlArg(), now).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, classify(ctx, err)
}

// bugLeaseTwoStatements reads the lease row, decides in Go, and writes it
// back in a second autocommit statement: two processes can both see the
// lease free and both compute the same token.
func (db *DB) bugLeaseTwoStatements(ctx context.Context, now int64, name, owner string, ttl int64) (*Lease, error) {
	var cur string
	var token, at int64
	err := db.st.leaseGet.QueryRowContext(ctx, name).Scan(&cur, &token, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		token = 1
	case err != nil:
		return nil, classify(ctx, err)
	case at > now && cur != owner:
		return nil, &LeaseHeldError{Name: name, Owner: cur, Expires: time.UnixMilli(at),
			Left: millisDuration(at - now)}
	case at <= now:
		token++
	}
	if _, err := db.st.bugLeaseInsert.ExecContext(ctx, name, owner, token, now+ttl); err != nil {
		return nil, classify(ctx, err)
	}
	extended := err == nil && at > now
	return &Lease{Name: name, Owner: owner, Token: token, Expires: time.UnixMilli(now + ttl), Extended: extended}, nil
}

// bugLeakError moves the first statement error of a group to the next verb
// of the group, which then reports an error it did not have while its own
// verb reports none.
func bugLeakError(errs []error) {
	for i, err := range errs {
		if err != nil && len(errs) > 1 {
			j := (i + 1) % len(errs)
			errs[i], errs[j] = errs[j], err
			return
		}
	}
}

// bugReopen is the planted bug CheckpointAfterFailedSync: once the handle
// failed, the checkpointer opens its connection afresh, on a descriptor
// the failed sync is not reported to, and goes on. It reports whether it
// did.
func (c *checkpointer) bugReopen(db *DB) bool {
	if !db.cfg.bugs.Has(bugs.CheckpointAfterFailedSync) || c.reopened || c.sqldb == nil {
		return false
	}
	c.reopened = true
	_ = c.close()
	sqldb, conn, err := openWALConn(context.Background(), db.dsn)
	if err != nil {
		return false
	}
	c.sqldb, c.conn = sqldb, conn
	return true
}

// bugCommitEach commits the transaction so far and begins another, as
// UpdateCommitsEach plants after each verb of an Update.
func (tx *Tx) bugCommitEach() error {
	if _, err := tx.db.st.commit.ExecContext(tx.ctx); err != nil {
		return classify(tx.ctx, err)
	}
	if err := tx.db.begin(tx.ctx); err != nil {
		return classify(tx.ctx, err)
	}
	return nil
}

// bugEmptyFlush is the planted bug EmptyFlushSkipsLost: a Flush that
// finds nothing buffered returns at once, leaving the errors background
// flushes kept for it.
func (db *DB) bugEmptyFlush() bool {
	if !db.cfg.bugs.Has(bugs.EmptyFlushSkipsLost) {
		return false
	}
	db.buf.mu.Lock()
	defer db.buf.mu.Unlock()
	return len(db.buf.deltas) == 0
}

// bugFlushWithoutTurn is the planted bug FlushSkipsWait: a Flush that
// finds the buffer's turn taken (a background flush in flight) flushes
// what is buffered without it, and reports true.
func (db *DB) bugFlushWithoutTurn(ctx context.Context) (error, bool) {
	if !db.cfg.bugs.Has(bugs.FlushSkipsWait) {
		return nil, false
	}
	if db.tryTurn() {
		db.giveTurn()
		return nil, false
	}
	return db.named("flush", "", joinErrors(db.buf.takeLost(), db.flushTaken(ctx, db.buf.take(), true))), true
}

// bugClaimEarly, with ClaimBeforeLock planted, claims the engine's time
// for a verb before it takes the handle's lock or joins the queue, reports
// it as the time the verb runs at, and returns it: the verb then runs at
// it, however long it waited. It returns 0 when the bug is not planted.
func (db *DB) bugClaimEarly(ctx context.Context) int64 {
	if !db.cfg.bugs.Has(bugs.ClaimBeforeLock) {
		return 0
	}
	now := db.time.nowMillis()
	db.claimed(ctx, now)
	return now
}

// bugLatestEarly returns the latest time the verbs of a group claimed
// early (bugClaimEarly), the time their leader then uses for the
// high-water mark, or 0 when none did.
func bugLatestEarly(ops []*pending) int64 {
	var t int64
	for _, o := range ops {
		t = max(t, o.early)
	}
	return t
}

// bugNow returns ms, DB.Now's answer, or, with NowReadsWall planted, the
// wall clock's time.
func (db *DB) bugNow(ms int64) int64 {
	if db.cfg.bugs.Has(bugs.NowReadsWall) {
		return db.cfg.clock.Wall().UnixMilli()
	}
	return ms
}
