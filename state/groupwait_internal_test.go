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

// TestGroupMarkWaitEndsOnlyTheCallerWhoseContextEnded: a group's write of
// the high-water mark waits for another connection's lock no longer than
// the context of the group's first caller allows. When that context ends
// the wait, its caller gets its context's error, and the callers grouped
// with it, whose contexts go on, wait on within their own budgets and run
// once the lock is free. Before, every caller of the group got ErrBusy
// saying the lock was held past the busy timeout (a minute here), though
// none had waited a moment of it.
func TestGroupMarkWaitEndsOnlyTheCallerWhoseContextEnded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "group.state")
	clock := &sleepHookClock{Clock: faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	db, err := Open(path, WithClock(clock), WithoutBackground(), WithBusyTimeout(time.Minute))
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	require.NoError(t, db.Set(ctx, "warmup", 1))
	clock.Advance(time.Second) // the mark is due: the group's first write is its

	raw, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	holder, err := raw.Conn(ctx)
	require.NoError(t, err)
	defer holder.Close()
	_, err = holder.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(t, err)
	release := sync.OnceFunc(func() {
		done := make(chan error, 1)
		go func() { _, err := holder.ExecContext(ctx, `ROLLBACK`); done <- err }()
		assert.NoError(t, <-done)
	})
	defer release()

	first, cancel := context.WithCancel(ctx)
	defer cancel()
	// The first pause ends the first caller's context; a later pause comes
	// after the group gave it its answer, and the holder lets go.
	clock.on = func(n int) {
		if n == 1 {
			cancel()
		} else {
			release()
		}
	}
	a := &pending{ctx: first, a: grouped, wake: make(chan struct{}, 1), fn: func(now int64) error {
		return db.set(first, now, "a", IntValue(1), 0)
	}}
	b := &pending{ctx: ctx, a: grouped, wake: make(chan struct{}, 1), fn: func(now int64) error {
		return db.set(ctx, now, "b", IntValue(2), 0)
	}}
	db.mu.Lock()
	db.runOne([]*pending{a, b})
	db.mu.Unlock()

	require.Equal(t, opDone, a.state.Load())
	require.Equal(t, opDone, b.state.Load())
	assert.ErrorIs(t, a.err, context.Canceled, "the caller whose context ended the wait")
	assert.NotErrorIs(t, a.err, ErrBusy, "no connection held the lock past the busy timeout")
	assert.NoError(t, b.err, "a caller grouped with it, whose context goes on")
	_, err = db.Get(ctx, "a")
	assert.ErrorIs(t, err, ErrNotFound, "the caller that got its context's error did nothing")
	v, err := db.Get(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, "2", v.String())
}

// sleepHookClock is a simulated clock that is a Sleeper: each pause calls
// on with its number (from 1), then passes at once, unless stop is closed.
type sleepHookClock struct {
	*faults.Clock
	mu sync.Mutex
	n  int
	on func(n int)
}

// Sleep calls on, then advances the clock by d, or returns false when stop
// is closed.
func (c *sleepHookClock) Sleep(d time.Duration, stop <-chan struct{}) bool {
	c.mu.Lock()
	c.n++
	n, on := c.n, c.on
	c.mu.Unlock()
	if on != nil {
		on(n)
	}
	select {
	case <-stop:
		return false
	default:
	}
	c.Advance(d)
	return true
}
