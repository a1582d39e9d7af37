package state

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// stmt is a statement prepared once on the handle's one connection and run
// through the driver directly. database/sql would add, to every call of a
// verb that itself takes a few microseconds, a connection lookup, a lock,
// argument conversion, a goroutine per cancellable context and a handful of
// allocations. Every call holds DB.mu, so the argument and result buffers
// are reused. A failed write's error says whether it found no room: a spent
// disk quota or the file size limit (noroom.go).
type stmt struct {
	q    driver.StmtQueryContext
	x    driver.StmtExecContext
	c    io.Closer
	dc   any                 // the driver connection, for the errno of a failed write
	args []driver.NamedValue // reused: calls are serialised by DB.mu
	vals []driver.Value      // reused: one row of results
}

// newStmt prepares query on the driver connection dc.
func newStmt(ctx context.Context, dc driver.ConnPrepareContext, query string) (*stmt, error) {
	ds, err := dc.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	q, okQ := ds.(driver.StmtQueryContext)
	x, okX := ds.(driver.StmtExecContext)
	if !okQ || !okX {
		ds.Close()
		return nil, fmt.Errorf("statekit: driver statement %T lacks context methods", ds)
	}
	return &stmt{q: q, x: x, c: ds, dc: dc}, nil
}

// bind turns args into the driver's named values. Arguments are the types
// the verbs pass: string, []byte, int64, int, bool and nil.
func (s *stmt) bind(args []any) ([]driver.NamedValue, error) {
	s.args = s.args[:0]
	for i, a := range args {
		switch v := a.(type) {
		case int:
			a = int64(v)
		case nil, string, []byte, int64, bool:
		default:
			return nil, fmt.Errorf("statekit: argument %d has type %T", i+1, a)
		}
		s.args = append(s.args, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	return s.args, nil
}

// unbind drops the references to the last call's arguments.
func (s *stmt) unbind() {
	clear(s.args)
	s.args = s.args[:0]
}

// A statement runs to its end once it starts: the driver is given a context
// that never ends. The verb's context bounds its waits (for the handle's lock,
// in the group-commit queue, and through the busy handler for another
// connection's lock: busy.go), not a statement in progress. The driver would
// otherwise interrupt it, and report the context's end even when the
// statement, an autocommit write or a COMMIT, had finished: a verb that
// returned its context's error could have taken effect, and Flush, which
// puts its deltas back when its COMMIT fails, counted them twice. So a verb
// that returns its context's error did nothing.

// ExecContext runs a statement that returns no rows.
func (s *stmt) ExecContext(ctx context.Context, args ...any) (driver.Result, error) {
	nv, err := s.bind(args)
	if err != nil {
		return nil, err
	}
	defer s.unbind()
	res, err := s.x.ExecContext(context.WithoutCancel(ctx), nv)
	return res, roomRefused(s.dc, err)
}

// QueryRowContext runs a query and reads its first row. The statement is
// reset before QueryRowContext returns, so an autocommit write (an
// INSERT ... RETURNING) has committed, or failed to, by then. Scan the
// returned row for the values or the error, sql.ErrNoRows for none.
func (s *stmt) QueryRowContext(ctx context.Context, args ...any) row {
	rs, err := s.QueryContext(ctx, args...)
	if err != nil {
		return row{err: err}
	}
	var r row
	if rs.Next() {
		r.vals = rs.vals
	} else {
		r.err = sql.ErrNoRows
	}
	if err := rs.Close(); err != nil {
		r.err = err
	}
	return r
}

// QueryContext runs a query. Close the rows (or read them to the end)
// before the next statement.
func (s *stmt) QueryContext(ctx context.Context, args ...any) (*rows, error) {
	nv, err := s.bind(args)
	if err != nil {
		return nil, err
	}
	defer s.unbind()
	dr, err := s.q.QueryContext(context.WithoutCancel(ctx), nv)
	if err != nil {
		return nil, roomRefused(s.dc, err)
	}
	if n := len(dr.Columns()); cap(s.vals) < n {
		s.vals = make([]driver.Value, n)
	} else {
		s.vals = s.vals[:n]
	}
	return &rows{dr: dr, vals: s.vals, dc: s.dc}, nil
}

// Close closes the statement.
func (s *stmt) Close() error { return s.c.Close() }

// row is the first row of a query, as database/sql's Row.
type row struct {
	vals []driver.Value
	err  error
}

// Scan copies the row's columns into dest, or returns the query's error
// (sql.ErrNoRows when there was no row).
func (r row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return scanValues(r.vals, dest)
}

// rows iterates over the result of a query, as database/sql's Rows. Err
// includes the error of closing, which is where an autocommit write with
// RETURNING commits.
type rows struct {
	dr     driver.Rows
	vals   []driver.Value
	dc     any // the statement's driver connection (roomRefused)
	err    error
	closed bool
}

// Next advances to the next row and reports whether there is one; at the
// end, or on an error, it closes the rows.
func (rs *rows) Next() bool {
	if rs.closed {
		return false
	}
	if err := rs.dr.Next(rs.vals); err != nil {
		if !errors.Is(err, io.EOF) {
			rs.err = roomRefused(rs.dc, err)
		}
		rs.Close()
		return false
	}
	return true
}

// Scan copies the current row's columns into dest.
func (rs *rows) Scan(dest ...any) error { return scanValues(rs.vals, dest) }

// Err returns the error that ended the iteration, or of closing, if any.
func (rs *rows) Err() error { return rs.err }

// Close resets the statement, and returns (and keeps for Err) its error.
func (rs *rows) Close() error {
	if rs.closed {
		return rs.err
	}
	rs.closed = true
	if err := rs.dr.Close(); err != nil && rs.err == nil {
		rs.err = roomRefused(rs.dc, err)
	}
	return rs.err
}

// scanValues copies driver values into the destinations the verbs scan
// into: *any, *int64, *int, *bool, *string and *sql.NullInt64.
func scanValues(vals []driver.Value, dest []any) error {
	if len(dest) != len(vals) {
		return fmt.Errorf("statekit: scan of %d columns into %d values", len(vals), len(dest))
	}
	for i, v := range vals {
		if err := scanValue(v, dest[i]); err != nil {
			return fmt.Errorf("statekit: column %d: %w", i+1, err)
		}
	}
	return nil
}

func scanValue(v driver.Value, dest any) error {
	if d, ok := dest.(*any); ok {
		*d = v
		return nil
	}
	if d, ok := dest.(*string); ok {
		switch x := v.(type) {
		case string:
			*d = x
		case []byte:
			*d = string(x)
		default:
			return fmt.Errorf("cannot scan %T into a string", v)
		}
		return nil
	}
	if d, ok := dest.(*sql.NullInt64); ok {
		if v == nil {
			*d = sql.NullInt64{}
			return nil
		}
		d.Valid = true
		return scanValue(v, &d.Int64)
	}
	n, ok := v.(int64)
	if !ok {
		return fmt.Errorf("cannot scan %T into %T", v, dest)
	}
	switch d := dest.(type) {
	case *int64:
		*d = n
	case *int:
		*d = int(n)
	case *bool:
		*d = n != 0
	default:
		return fmt.Errorf("cannot scan into %T", dest)
	}
	return nil
}
