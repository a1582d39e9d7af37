package state

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sleepingClock is a clock whose pauses pass at once and move its time on
// by what was asked, so a verb's waits are measured on it exactly; nothing
// else moves it. Before each pause it calls before, if set.
type sleepingClock struct {
	*faults.Clock
	before func()
}

func (c *sleepingClock) Sleep(d time.Duration, _ <-chan struct{}) bool {
	if c.before != nil {
		c.before()
	}
	c.Advance(d)
	return true
}

// TestBusyGroupFailsWithinEachVerbsBudget: a group of three verbs, nothing
// of the handle ahead of them, whose BEGIN finds another connection
// holding the file's write lock: each verb fails with ErrBusy within its
// busy timeout from its call, measured on the clock the pauses move.
// Before, the group waited a budget, and then each verb, run alone, a
// budget of its own again: the third was answered after four timeouts.
func TestBusyGroupFailsWithinEachVerbsBudget(t *testing.T) {
	const timeout = time.Second
	ctx := context.Background()
	clock := &sleepingClock{Clock: faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	path := filepath.Join(t.TempDir(), "busy.state")
	db, err := Open(path, WithClock(clock), WithBusyTimeout(timeout), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set(ctx, "warmup", 1)) // the mark is written, a lead ahead

	lockFile(t, path)

	// Only the pauses move the clock: a verb answered between two pauses
	// was answered at the time the second one begins at, or the time the
	// group ends at.
	ops := make([]*pending, 3)
	for i := range ops {
		ops[i] = &pending{ctx: ctx, a: grouped, wake: make(chan struct{}, 1), start: clock.Monotonic(),
			fn: func(now int64) error { _, err := db.incrBy(ctx, now, "n", 1, 0); return err }}
	}
	answered := make([]time.Duration, len(ops))
	seen := func() {
		for i, o := range ops {
			if answered[i] == 0 && o.state.Load() == opDone {
				answered[i] = clock.Monotonic() - o.start
			}
		}
	}
	clock.before = seen
	db.mu.Lock()
	db.runGroup(ops)
	db.mu.Unlock()
	clock.before = nil
	seen()
	for i, o := range ops {
		require.Equal(t, opDone, o.state.Load(), "verb %d", i)
		assert.ErrorIs(t, o.err, ErrBusy, "verb %d", i)
	}
	t.Logf("answered after %v (busy timeout %v)", answered, timeout)
	for i, took := range answered {
		assert.LessOrEqual(t, took, timeout, "verb %d: one budget for the whole verb", i)
		assert.GreaterOrEqual(t, took, timeout, "verb %d: and all of it", i)
	}
}

// lockFile takes the file's write lock on a connection of its own (BEGIN
// IMMEDIATE) until the release it returns is called, or the test ends.
func lockFile(t *testing.T, path string) (release func()) {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	raw.SetMaxOpenConns(1)
	conn, err := raw.Conn(context.Background())
	require.NoError(t, err)
	_, err = conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`)
	require.NoError(t, err)
	release = sync.OnceFunc(func() {
		_, _ = conn.ExecContext(context.Background(), `ROLLBACK`)
		_ = conn.Close()
		_ = raw.Close()
	})
	t.Cleanup(release)
	return release
}

// TestBusyMarkWaitEndsOnlyForTheVerbWhoseContextEnded: a group of two
// verbs must write the high-water mark first, and another connection
// holds the file's lock. The first verb's context ends during the wait:
// it gets its context's error, not ErrBusy (its busy timeout, a minute,
// did not pass), and the other verb goes on waiting on its own budget,
// and is written once the lock is let go. Before, both got ErrBusy when
// the first one's context ended.
func TestBusyMarkWaitEndsOnlyForTheVerbWhoseContextEnded(t *testing.T) {
	ctx := context.Background()
	clock := &sleepingClock{Clock: faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	path := filepath.Join(t.TempDir(), "mark.state")
	db, err := Open(path, WithClock(clock), WithBusyTimeout(time.Minute), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set(ctx, "warmup", 1))
	clock.Advance(time.Second) // past the mark: the next write writes it first
	release := lockFile(t, path)

	first, cancel := context.WithCancel(ctx)
	defer cancel()
	incr := func(ctx context.Context, key string) *pending {
		return &pending{ctx: ctx, a: grouped, wake: make(chan struct{}, 1), start: clock.Monotonic(),
			fn: func(now int64) error { _, err := db.incrBy(ctx, now, key, 1, 0); return err }}
	}
	ops := []*pending{incr(first, "a"), incr(ctx, "b")}
	pauses := 0
	clock.before = func() {
		pauses++
		switch pauses {
		case 1:
			cancel()
		case 5:
			release()
		}
	}
	db.mu.Lock()
	db.runGroup(ops)
	db.mu.Unlock()
	clock.before = nil

	require.GreaterOrEqual(t, pauses, 5, "the wait for the lock ended before it was let go")
	assert.ErrorIs(t, ops[0].err, context.Canceled, "the verb whose context ended")
	assert.NotErrorIs(t, ops[0].err, ErrBusy, "its busy timeout did not pass")
	assert.NoError(t, ops[1].err, "the verb beside it waits on its own budget")
	_, err = db.Get(ctx, "a")
	assert.ErrorIs(t, err, ErrNotFound, "the cancelled verb wrote nothing")
	v, err := db.Get(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, IntValue(1), v)
}
