package sim

import (
	"context"
	"database/sql"
	"time"
)

// foreignRead is the foreign program that reads in WAL mode: a shell left
// in a read transaction. It reads every row, keeps its snapshot for
// plan.hold ms, so that no checkpoint may copy past it and the WAL cannot
// start over behind it, and then ends its transaction and closes the file
// (the last connection to close checkpoints and removes the WAL) or is
// killed. It stops keeping the snapshot at once when an error strikes
// meanwhile, as the writer's hold does: the page repair after a failed
// sync or a full disk needs a moment when a checkpoint can copy the whole
// WAL (CORRECTNESS.md says a reader kept past an Open's busy timeout defers
// it to the next Open).
func (w *world) foreignRead(f *process, conn *sql.Conn, plan *foreignPlan) {
	ctx := context.Background()
	var rows, bytes, leases int64
	for _, q := range []string{"BEGIN", "SELECT count(*), coalesce(sum(length(value)), 0) FROM kv", "SELECT count(*) FROM leases"} {
		var err error
		switch q {
		case "BEGIN":
			_, err = conn.ExecContext(ctx, q)
		case "SELECT count(*) FROM leases":
			err = conn.QueryRowContext(ctx, q).Scan(&leases)
		default:
			err = conn.QueryRowContext(ctx, q).Scan(&rows, &bytes)
		}
		if err != nil {
			w.foreignEnd(f, q, err)
			return
		}
	}
	if w.tearing || !w.m.Powered() {
		return
	}
	w.logf("p%d (sqlite3) keeps a read snapshot (%d keys, %d leases) for %dms", f.pid, rows, leases, plan.hold)
	seen := w.errorCount()
	w.foreignReading = true
	if !w.sched.sleep(time.Duration(plan.hold)*time.Millisecond, func() bool { return w.errorsSince(seen) }) &&
		!w.tearing && w.m.Powered() {
		w.logf("p%d (sqlite3) stops reading: an error struck", f.pid)
	}
	w.foreignReading = false
	if w.tearing || !w.m.Powered() {
		return
	}
	if !plan.exits {
		w.m.Crash(f.pid)
		w.logf("p%d (sqlite3) killed in its read", f.pid)
		return
	}
	_, err := conn.ExecContext(ctx, "COMMIT")
	if err == nil {
		err = conn.Close()
	}
	w.foreignEnd(f, "ends its read and exits", err)
}
