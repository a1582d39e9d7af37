package state

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queued reports how many verbs wait in the handle's queue.
func (q *queue) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ops)
}

// TestGroupedGrantsWhoseSyncFailsAreNotGranted: grants called at the same
// moment share one commit and one sync of the WAL after it; when that sync
// fails, no grant of the group is answered as granted (each gets ErrIO,
// wrapping the cause), the handle refuses what comes after, and the file,
// opened again after a power loss, is sound and gives the next grant a
// token above every token the group could have written. The test holds the
// handle's lock while the callers queue, so the group is formed, not hoped
// for; answering the grants despite the failed sync fails it.
func TestGroupedGrantsWhoseSyncFailsAreNotGranted(t *testing.T) {
	ctx := context.Background()
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := faults.NewMemFS(1)
	open := func(proc int) *DB {
		db, err := Open("/sim/grants.state", WithFS(m.Process(proc)), WithClock(clock), WithoutBackground())
		require.NoError(t, err)
		return db
	}
	db := open(1)
	defer db.Close()
	for _, name := range []string{"L0", "L1", "L2"} { // each name has token 1 already
		l, err := db.Lease(ctx, name, "before", time.Minute)
		require.NoError(t, err)
		require.NoError(t, db.Release(ctx, l))
	}

	const grants = 3
	db.mu.Lock() // the callers queue behind the lock the test holds
	answers := make(chan error, grants)
	for i := range grants {
		go func() {
			l, err := db.Lease(ctx, fmt.Sprintf("L%d", i), "g", time.Minute)
			if err == nil {
				err = fmt.Errorf("L%d granted with token %d", i, l.Token)
			}
			answers <- err
		}()
	}
	for db.q.queued() < grants {
		runtime.Gosched()
	}
	m.FailAt(faults.OpSync, 1) // the group's sync after its COMMIT
	db.unlock()                // the oldest caller leads, and takes the others into its group
	for range grants {
		err := <-answers
		require.ErrorIs(t, err, ErrIO, "a grant whose sync failed")
		require.ErrorIs(t, err, faults.ErrInjected, "the error wraps its cause")
		assert.ErrorContains(t, err, "lease granted and committed, but the sync of /sim/grants.state-wal failed")
	}
	_, err := db.Incr(ctx, "n")
	require.ErrorIs(t, err, ErrIO, "the handle refuses writes after a failed sync")

	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	_ = db.Close()
	clock.Advance(time.Hour) // every lease has expired
	db2 := open(2)
	defer db2.Close()
	findings, err := db2.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, findings, "the file after the power loss")
	for i := range grants {
		l, err := db2.Lease(ctx, fmt.Sprintf("L%d", i), "after", time.Minute)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, l.Token, int64(2), "L%d's token after the failed group", i)
	}
}
