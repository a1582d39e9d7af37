package state

import (
	"context"
	"encoding/json"
	"errors"
)

// The planted bug SweepStaleDelete's statements: the rows chosen in one
// turn, and their deletion by rowid alone in the next.
const (
	bugSweepChooseSQL = `SELECT rowid FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?1 LIMIT ?2`
	bugSweepDeleteSQL = `DELETE FROM kv WHERE rowid IN (SELECT value FROM json_each(?1)) RETURNING key`
)

// staleSweep is what the planted bug SweepStaleDelete carries from one
// sweep turn to the next: the rows it chose.
type staleSweep struct {
	rowids []int64
}

// bugSweepStale is the planted bug SweepStaleDelete: a sweep that chooses
// the rows expired at cutoff in one queued turn and deletes them, by rowid
// and nothing else, in its next. The verbs queued between the two turns run
// between them, and a row one of them made live again (an upsert keeps its
// rowid) is deleted live. The real sweep reads each row's deadline in the
// DELETE that deletes it. Callers hold mu.
func (db *DB) bugSweepStale(ctx context.Context, s *staleSweep, cutoff int64) (int, bool, func(error), error) {
	if s.rowids == nil {
		rs, err := db.conn.QueryContext(ctx, bugSweepChooseSQL, cutoff, db.sweepLimit())
		if err != nil {
			return 0, false, nil, classify(ctx, err)
		}
		var ids []int64
		for rs.Next() {
			var id int64
			if err = rs.Scan(&id); err != nil {
				break
			}
			ids = append(ids, id)
		}
		if err = classify(ctx, errors.Join(err, rs.Err(), rs.Close())); err != nil || len(ids) == 0 {
			return 0, false, nil, err
		}
		s.rowids = ids
		return 0, true, nil, nil // the next turn deletes them
	}
	ids := s.rowids
	s.rowids = nil
	b, err := json.Marshal(ids)
	if err != nil {
		return 0, false, nil, err
	}
	var end func([]string, error)
	if o := db.cfg.sweeps; o != nil {
		end = o.Sweeping(cutoff, false)
	}
	var keys []string
	rs, err := db.conn.QueryContext(ctx, bugSweepDeleteSQL, string(b))
	if err == nil {
		for rs.Next() {
			var k string
			if err = rs.Scan(&k); err != nil {
				break
			}
			keys = append(keys, k)
		}
		err = errors.Join(err, rs.Err(), rs.Close())
	}
	err = classify(ctx, err)
	if err != nil {
		keys = nil
	}
	// Told as the real sweep's are: after the turn, by its caller.
	return len(keys), err == nil, db.sweepEnd(end, keys, len(keys), -1), err
}
