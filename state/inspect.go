package state

import "context"

// Read-only inspection: what statectl and any operator needs to see a file
// without changing it. Scan (scan.go), Leases (leaselist.go), Stats
// (stats.go) and Check (check.go) only read, so they work on a handle
// opened WithReadOnly, and on a writable handle they take the lock for one
// short page at a time, never across a caller's callback. This file holds
// what they share.

// scanPageRows bounds the rows one Scan or Leases page reads under the lock.
const scanPageRows = 256

// inReadTx runs fn inside a deferred transaction, so every read in it sees
// one snapshot, and ends it without writing. Callers hold mu.
func (db *DB) inReadTx(ctx context.Context, fn func() error) error {
	if _, err := db.conn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		return classify(ctx, err)
	}
	err := fn()
	if _, rerr := db.conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`); rerr != nil && err == nil {
		err = classify(ctx, rerr)
	}
	return err
}
