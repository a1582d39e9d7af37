package state

import (
	"context"
	"fmt"
)

// Checkpoints when several processes write the file. Each process counts
// only its own writes, and the last pass of its background checkpoint runs
// under its handle's lock, which stops no other process. Measured with four
// processes incrementing one key back to back at the default interval: with
// a passive last pass the WAL never started over while they all wrote (it
// reached 100,000 frames and more, TestWALStartsOverWithSeveralProcesses),
// though that pass copied the whole WAL. A long WAL costs every
// transaction: SQLite finds a page's latest frame by probing its WAL index
// past every earlier frame of that page in a block of 4,096 (walFindFrame),
// and a connection reads its pages from the WAL again whenever another
// process committed since its last transaction (its page cache is dropped),
// so on a hot key every transaction probes thousands of frames (13% of the
// processes' CPU in a profile).
//
// So the last pass is a RESTART checkpoint without a busy handler
// (runLast). If no other connection holds the write lock at that instant,
// SQLite takes it, copies the rest of the WAL, syncs the file and, if no
// reader is on an older snapshot, leaves the WAL so that the next commit,
// of any process, starts it over. If the write lock is held, SQLite runs it
// as the passive checkpoint it replaces. It never waits, so the handle's
// lock is held no longer than before. And the checkpointer asks for a
// checkpoint every every writes of its own, lowered (down to an eighth of
// the interval) by the share of the WAL's frames its process wrote (adapt),
// so that the WAL is checkpointed about as often, in frames, whoever writes
// them.

// checkpointLastSQL is the last pass: it copies what it can, and starts the
// WAL over if it may, waiting for no one (busy_timeout 0 around it).
const checkpointLastSQL = `PRAGMA wal_checkpoint(RESTART)`

// runLast runs the last pass of a background checkpoint. Callers hold DB.mu.
func (c *checkpointer) runLast(db *DB) (frames, copied int64, err error) {
	ctx := context.Background()
	if _, err := c.conn.ExecContext(ctx, `PRAGMA busy_timeout=0`); err != nil {
		return -1, -1, classify(ctx, err)
	}
	var busy int64
	err = roomRefusedOn(c.conn, c.conn.QueryRowContext(ctx, checkpointLastSQL).Scan(&busy, &frames, &copied))
	_, rerr := c.conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout=%d`, db.cfg.busyTimeout.Milliseconds()))
	if err == nil {
		err = rerr
	}
	return frames, copied, classify(ctx, err)
}

// adapt sets every from what the last pass found: frames in the WAL, of
// which this process wrote own pages, since the last checkpoint's last pass
// copied the whole WAL (so that the WAL started over, or will at the next
// commit). Callers hold DB.mu.
func (c *checkpointer) adapt(base int, own, frames int64) {
	if own <= 0 || frames <= 0 {
		return // nothing to tell from
	}
	c.every = base
	if frames > own {
		c.every = max(int(int64(base)*own/frames), base/8, 1)
	}
}
