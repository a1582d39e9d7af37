package state

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	sqlite "modernc.org/sqlite"
)

func init() {
	// statekit_raise(msg) fails the statement with msg. Registered as
	// non-deterministic so SQLite never evaluates it outside its CASE branch.
	sqlite.MustRegisterScalarFunction("statekit_raise", 1,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			return nil, fmt.Errorf("%v", args[0])
		})
	// Sync commits with fdatasync(2), as SQLite's own Linux builds do: it
	// skips the timestamp update fsync(2) forces through the file system's
	// journal, and a commit is just as durable. The setting is the driver's
	// and process-wide; it does nothing where fdatasync does not exist.
	_, _ = sqlite.Fdatasync(true)
}

// stmts holds every statement the verbs run, prepared once at Open on the
// handle's one connection: the hot path of each verb is one statement, run
// through the driver directly (see stmt).
type stmts struct {
	get, set, delOne, delMany, incr, incrLive *stmt
	casSwap, casDelete, casCreate, casAbsent  *stmt
	casSwapTTL, casCreateTTL                  *stmt
	expire, ttl                               *stmt
	leaseGrant, leaseGet, renew, release      *stmt
	sweep, hwmGet, hwmSet                     *stmt
	begin, commit, rollback                   *stmt
	bugGetAny, bugRenewBump, bugReleaseDelete *stmt
	bugCASText, bugIncrPlain, bugIncrExpire   *stmt
	bugLeaseInsert, bugDelAll, sweepKeys      *stmt
	all                                       []*stmt
}

const (
	// hwmGetSQL reads the high-water mark: the largest of the marks folded
	// in by closed handles and those of handles still open (or crashed).
	hwmGetSQL = `SELECT coalesce(max(v), 0) FROM meta WHERE k = 'hwm' OR k GLOB 'hwm:*'`
	// hwmSetSQL moves this handle's mark (?1) forward to ?2, never back.
	hwmSetSQL = `INSERT INTO meta(k, v) VALUES (?1, ?2)
ON CONFLICT(k) DO UPDATE SET v = max(v, excluded.v) RETURNING v`
)

// prepare prepares every statement on conn; the planted bugs' statements
// and the observed sweep only when internal hooks ask for them.
func prepare(ctx context.Context, conn *sql.Conn, withBugs, withSweepKeys bool) (*stmts, error) {
	s := &stmts{}
	list := []struct {
		dst **stmt
		sql string
	}{
		{&s.get, getSQL}, {&s.set, setSQL}, {&s.delOne, delOneSQL}, {&s.delMany, delManySQL},
		{&s.incr, incrSQL}, {&s.incrLive, incrLiveSQL},
		{&s.casSwap, casSwapSQL}, {&s.casDelete, casDeleteSQL}, {&s.casCreate, casCreateSQL},
		{&s.casAbsent, casAbsentSQL}, {&s.casSwapTTL, casSwapTTLSQL}, {&s.casCreateTTL, casCreateTTLSQL},
		{&s.expire, expireSQL}, {&s.ttl, ttlSQL},
		{&s.leaseGrant, leaseGrantSQL}, {&s.leaseGet, leaseGetSQL}, {&s.renew, renewSQL},
		{&s.release, releaseSQL},
		{&s.sweep, sweepSQL}, {&s.hwmGet, hwmGetSQL}, {&s.hwmSet, hwmSetSQL},
		{&s.begin, beginSQL}, {&s.commit, commitSQL}, {&s.rollback, rollbackSQL},
	}
	planted := []struct {
		dst **stmt
		sql string
	}{
		{&s.bugGetAny, bugGetAnySQL}, {&s.bugRenewBump, bugRenewBumpSQL},
		{&s.bugReleaseDelete, bugReleaseDeleteSQL}, {&s.bugCASText, bugCASTextSQL},
		{&s.bugIncrPlain, bugIncrPlainSQL}, {&s.bugIncrExpire, bugIncrExpireSQL},
		{&s.bugLeaseInsert, bugLeaseInsertSQL}, {&s.bugDelAll, bugDelAllSQL},
	}
	if withBugs {
		list = append(list, planted...)
	}
	if withSweepKeys {
		list = append(list, struct {
			dst **stmt
			sql string
		}{&s.sweepKeys, sweepKeysSQL})
	}
	// The driver connection stays in use after Raw returns: the handle
	// holds conn, never gives it back to the pool, and serialises every
	// statement on it with DB.mu.
	err := conn.Raw(func(dc any) error {
		pc, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("statekit: driver connection %T cannot prepare with a context", dc)
		}
		for _, p := range list {
			st, err := newStmt(ctx, pc, p.sql)
			if err != nil {
				return fmt.Errorf("prepare %.40q: %w", p.sql, err)
			}
			*p.dst = st
			s.all = append(s.all, st)
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(err, s.close())
	}
	return s, nil
}

// close closes every prepared statement.
func (s *stmts) close() error {
	var errs []error
	for _, st := range s.all {
		errs = append(errs, st.Close())
	}
	s.all = nil
	return errors.Join(errs...)
}
