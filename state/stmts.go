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
}

// stmts holds every statement the verbs run, prepared once at Open on the
// handle's one connection: the hot path of each verb is one statement.
type stmts struct {
	get, set, delOne, delMany, incr               *sql.Stmt
	casSwap, casDelete, casCreate, casAbsent      *sql.Stmt
	expire, ttl                                   *sql.Stmt
	leaseGrant, leaseGet, renew, release          *sql.Stmt
	sweep, hwmGet, hwmSet, touch                  *sql.Stmt
	begin, commit, rollback, syncFull, syncNormal *sql.Stmt
	bugGetAny, bugRenewBump, bugReleaseDelete     *sql.Stmt
	bugCASText, bugIncrPlain, bugIncrExpire       *sql.Stmt
	bugLeaseInsert                                *sql.Stmt
	all                                           []*sql.Stmt
}

const (
	hwmGetSQL = `SELECT v FROM meta WHERE k = 'hwm'`
	// hwmSetSQL moves the high-water mark forward, never back.
	hwmSetSQL = `UPDATE meta SET v = max(v, ?1) WHERE k = 'hwm' RETURNING v`
)

// prepare prepares every statement on conn; the planted bugs' statements
// only when a bug is planted.
func prepare(ctx context.Context, conn *sql.Conn, withBugs bool) (*stmts, error) {
	s := &stmts{}
	list := []struct {
		dst **sql.Stmt
		sql string
	}{
		{&s.get, getSQL}, {&s.set, setSQL}, {&s.delOne, delOneSQL}, {&s.delMany, delManySQL},
		{&s.incr, incrSQL},
		{&s.casSwap, casSwapSQL}, {&s.casDelete, casDeleteSQL}, {&s.casCreate, casCreateSQL},
		{&s.casAbsent, casAbsentSQL},
		{&s.expire, expireSQL}, {&s.ttl, ttlSQL},
		{&s.leaseGrant, leaseGrantSQL}, {&s.leaseGet, leaseGetSQL}, {&s.renew, renewSQL},
		{&s.release, releaseSQL},
		{&s.sweep, sweepSQL}, {&s.hwmGet, hwmGetSQL}, {&s.hwmSet, hwmSetSQL}, {&s.touch, touchSQL},
		{&s.begin, beginSQL}, {&s.commit, commitSQL}, {&s.rollback, rollbackSQL},
		{&s.syncFull, `PRAGMA synchronous=FULL`}, {&s.syncNormal, `PRAGMA synchronous=NORMAL`},
	}
	planted := []struct {
		dst **sql.Stmt
		sql string
	}{
		{&s.bugGetAny, bugGetAnySQL}, {&s.bugRenewBump, bugRenewBumpSQL},
		{&s.bugReleaseDelete, bugReleaseDeleteSQL}, {&s.bugCASText, bugCASTextSQL},
		{&s.bugIncrPlain, bugIncrPlainSQL}, {&s.bugIncrExpire, bugIncrExpireSQL},
		{&s.bugLeaseInsert, bugLeaseInsertSQL},
	}
	if withBugs {
		list = append(list, planted...)
	}
	for _, p := range list {
		st, err := conn.PrepareContext(ctx, p.sql)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("prepare %.40q: %w", p.sql, err), s.close())
		}
		*p.dst = st
		s.all = append(s.all, st)
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
