package sim

import (
	"context"
	"database/sql"
	"time"
)

// foreignRead is the foreign program that reads in WAL mode: a shell left
// in a read transaction, or a backup tool. It reads every row and keeps
// its snapshot for plan.hold ms whatever strikes meanwhile, so that no
// checkpoint may copy past it and the WAL cannot start over behind it
// (the page repair of an Open after a failed sync does not wait for it:
// state/walrepairbehind.go). Then it ends its transaction and closes the
// file (the last connection to close checkpoints and removes the WAL), or
// is killed: always, when an error struck meanwhile.
func (w *world) foreignRead(f *process, conn *sql.Conn, plan *foreignPlan) {
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		w.foreignEnd(f, "BEGIN", err)
		return
	}
	var rows, bytes, leases int64
	for _, r := range []struct {
		q   string
		dst []any
	}{
		{"SELECT count(*), coalesce(sum(length(value)), 0) FROM kv", []any{&rows, &bytes}},
		{"SELECT count(*) FROM leases", []any{&leases}},
	} {
		if err := conn.QueryRowContext(ctx, r.q).Scan(r.dst...); err != nil {
			w.foreignEnd(f, r.q, err)
			return
		}
	}
	if w.tearing || !w.m.Powered() {
		return
	}
	w.logf("p%d (sqlite3) keeps a read snapshot (%d keys, %d leases) for %dms", f.pid, rows, leases, plan.hold)
	seen := w.errorCount()
	w.foreignReading = true
	w.sched.sleep(time.Duration(plan.hold)*time.Millisecond, nil)
	w.foreignReading = false
	if w.tearing || !w.m.Powered() {
		return
	}
	if !plan.exits || w.errorsSince(seen) {
		// After an error it never exits: the last connection to close
		// checkpoints, and plain SQLite knows nothing of what statekit
		// repairs after one.
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
