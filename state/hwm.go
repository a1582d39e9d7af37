package state

import (
	"context"
	"fmt"
	"math"

	"github.com/statekit/statekit/internal/bugs"
)

// The high-water mark. Every writable handle keeps its own row in meta,
// "hwm:<n>", written hwmLeadMillis ahead of its time whenever its time
// reaches it, so the file always holds a mark at or after every time any
// handle has used — reads included — at the cost of one write per lead. A
// clean Close folds the exact latest time it used into the "hwm" row and
// deletes its own, so a short-lived process does not push the next one's
// time ahead: only a crash leaves a row up to hwmLeadMillis ahead of the
// time actually used. At open, time starts at the larger of the wall clock
// and every mark in the file; a handle that starts from a mark ahead of the
// wall clock keeps its own only hwmLeadAheadMillis ahead, so processes
// killed again and again add little each.
const (
	// handleSQL numbers a new writable handle.
	handleSQL = `INSERT INTO meta(k, v) VALUES ('handles', 1)
ON CONFLICT(k) DO UPDATE SET v = v + 1 RETURNING v`
	// foldSQL folds a closing handle's exact latest time (?1) into "hwm".
	foldSQL = `UPDATE meta SET v = max(v, ?1) WHERE k = 'hwm'`
	// dropMarksSQL deletes this handle's row (?1) and every handle's row the
	// folded mark already covers.
	dropMarksSQL = `DELETE FROM meta WHERE k GLOB 'hwm:*'
AND (k = ?1 OR v <= (SELECT v FROM meta WHERE k = 'hwm'))`
)

// loadHWM reads the mark, starts the engine's time from it, and gives a
// writable handle its own mark row.
func (db *DB) loadHWM(ctx context.Context) error {
	var hwm int64
	if err := db.st.hwmGet.QueryRowContext(ctx).Scan(&hwm); err != nil {
		return classify(ctx, err)
	}
	noHWM := db.cfg.bugs.Has(bugs.NoHWM) || (db.cfg.readOnly && db.cfg.bugs.Has(bugs.ReadOnlyNoHWM))
	db.time = newEngineTime(db.cfg.clock, hwm, noHWM)
	db.hwmMillis = hwm // the marks in the file cover every time up to it
	if db.cfg.readOnly {
		return nil
	}
	var n int64
	if err := db.conn.QueryRowContext(ctx, handleSQL).Scan(&n); err != nil {
		return classify(ctx, err)
	}
	db.hwmKey = fmt.Sprintf("hwm:%d", n)
	return nil
}

// advanceHWM moves this handle's mark a lead ahead (hwmLeadMillis, or
// hwmLeadAheadMillis for a handle that started ahead of the wall clock)
// once now reaches it, or at once when the shared index was marked or
// rebuilt since the handle last looked (indexwatch.go). Callers hold mu.
func (db *DB) advanceHWM(ctx context.Context, now int64) error {
	if db.hwmKey == "" {
		return nil
	}
	if db.indexRebuilt() {
		// Another handle's failed sync may have taken the mark back
		// (indexwatch.go): write it again before now is used.
		db.hwmMillis = math.MinInt64
	}
	if now < db.hwmMillis {
		return nil
	}
	// Cheap enough here, at most once per lead: before the handle writes
	// on, see that no other program damaged its files (walcheck.go).
	if err := db.refuseOutsideDamage(); err != nil {
		return err
	}
	var v int64
	if err := db.st.hwmSet.QueryRowContext(ctx, db.hwmKey, now+db.time.leadMillis()).Scan(&v); err != nil {
		return classify(ctx, err)
	}
	if v < now {
		panic(fmt.Sprintf("statekit: high-water mark %d behind now %d", v, now))
	}
	db.hwmMillis = v
	db.indexRebuilt() // the header as this write left it: the next look compares with it
	return nil
}

// foldHWM folds the exact latest time this handle used into the file's mark
// and deletes its row. A handle that failed leaves its row, as a crash does.
// Callers hold mu.
func (db *DB) foldHWM(ctx context.Context) error {
	if db.hwmKey == "" || db.failed != nil {
		return nil
	}
	if _, err := db.conn.ExecContext(ctx, beginSQL); err != nil {
		return db.explain(db.conn, classify(ctx, roomRefusedOn(db.conn, err)))
	}
	_, err := db.conn.ExecContext(ctx, foldSQL, db.time.usedMillis())
	if err == nil {
		_, err = db.conn.ExecContext(ctx, dropMarksSQL, db.hwmKey)
	}
	if err == nil {
		_, err = db.conn.ExecContext(ctx, commitSQL)
	}
	if err != nil {
		// SQLite may have rolled the transaction back already (on a full
		// disk it does): this ROLLBACK's own error says nothing more.
		_, _ = db.conn.ExecContext(ctx, rollbackSQL)
		return db.explain(db.conn, classify(ctx, roomRefusedOn(db.conn, err)))
	}
	return nil
}
