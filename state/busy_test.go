package state_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/sysclock"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holdWriteLock opens path with a plain SQLite connection and takes the
// file's write lock (BEGIN IMMEDIATE) until release is called, or the test
// ends.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	raw.SetMaxOpenConns(1)
	conn, err := raw.Conn(t.Context())
	require.NoError(t, err)
	_, err = conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`)
	require.NoError(t, err)
	release = sync.OnceFunc(func() {
		_, _ = conn.ExecContext(context.Background(), `ROLLBACK`)
		_ = conn.Close()
		_ = raw.Close()
	})
	t.Cleanup(release)
	return release
}

// TestZeroBusyTimeoutNeverWaits: WithBusyTimeout(0) means never wait, not
// no limit: a verb that finds another connection's write lock on the file
// fails with ErrBusy at once (a busy timeout of zero read as "for ever"
// would hang here), writes nothing, and the handle goes on once the lock
// is free.
func TestZeroBusyTimeoutNeverWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.state")
	db, err := state.Open(path, state.WithBusyTimeout(0), state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	require.NoError(t, db.Set(ctx, "k", "before"))
	release := holdWriteLock(t, path)
	err = db.Set(ctx, "k", "during")
	require.ErrorIs(t, err, state.ErrBusy)
	release()
	v, err := db.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "before", v.String(), "the refused Set wrote nothing")
	require.NoError(t, db.Set(ctx, "k", "after"), "the handle goes on")
}

// pauseSignal is the machine's clock (as without WithClock) that closes
// paused at the first pause the busy handler asks of it once armed: the
// verb it pauses holds the handle's lock and waits for the file's.
type pauseSignal struct {
	*sysclock.Clock
	armed  atomic.Bool
	once   sync.Once
	paused chan struct{}
}

func (c *pauseSignal) Sleep(d time.Duration, stop <-chan struct{}) bool {
	if c.armed.Load() {
		c.once.Do(func() { close(c.paused) })
	}
	return c.Clock.Sleep(d, stop)
}

// TestBusyTimeoutBoundsTheWholeVerb: a verb queued behind another verb
// that waits for a lock held elsewhere fails within its own busy timeout,
// from its call, not its timeout after the one ahead of it gave up. (With
// SQLite's busy handler it took the rest of the first verb's wait and then
// a whole timeout of its own.) The bound is what that takes at least on
// any machine, since a busy handler sleeps out the whole timeout: the
// first verb's wait ends a timeout after its call at the earliest, and the
// queued one's then lasts a timeout more. One budget leaves nearly a whole
// timeout of slack below it for a loaded machine; the test queues its verb
// once the first one pauses, not after a fixed sleep, to keep that slack.
func TestBusyTimeoutBoundsTheWholeVerb(t *testing.T) {
	const timeout = 4 * time.Second
	path := filepath.Join(t.TempDir(), "busy.state")
	clock := &pauseSignal{Clock: sysclock.New(), paused: make(chan struct{})}
	db, err := state.Open(path, state.WithClock(clock), state.WithBusyTimeout(timeout), state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	release := holdWriteLock(t, path)
	defer release() // before Close, which would wait for it

	var wg sync.WaitGroup
	wg.Add(1)
	var firstErr error
	clock.armed.Store(true)
	firstCalled := time.Now()
	go func() { // the first holds the handle's lock while it waits
		defer wg.Done()
		_, firstErr = db.Lease(ctx, "job", "a", time.Minute)
	}()
	select {
	case <-clock.paused:
	case <-time.After(time.Minute):
		t.Fatal("the first verb did not wait for the lock within a minute")
	}
	began := time.Now()
	err = db.Set(ctx, "k", "v") // queued behind it
	took := time.Since(began)
	wg.Wait()
	assert.ErrorIs(t, firstErr, state.ErrBusy)
	require.ErrorIs(t, err, state.ErrBusy)
	assert.True(t, strings.HasPrefix(err.Error(), path+`: set "k": `), err.Error())
	twoBudgets := 2*timeout - began.Sub(firstCalled) // the rest of the first verb's, and a whole one
	t.Logf("queued verb failed after %v (busy timeout %v; two budgets take %v at least)", took, timeout, twoBudgets)
	assert.Less(t, took, twoBudgets, "one budget for the whole verb")
	// Queued as the first verb began to wait, it still waits its whole
	// timeout from its own call: a slow machine only makes it more.
	assert.GreaterOrEqual(t, took, timeout, "all of its budget")
}

// TestDefaultBusyTimeoutIsFiveSeconds: the README and the error table say
// a verb waits 5 s for another connection's lock unless told otherwise.
func TestDefaultBusyTimeoutIsFiveSeconds(t *testing.T) {
	assert.Equal(t, 5*time.Second, state.DefaultBusyTimeout)
}

// TestBusyWaitEndsWithTheContext: a verb waiting for another connection's
// lock stops when its context ends, long before the busy timeout, and
// returns its context's error, having done nothing: whether its first wait
// is for the high-water mark's write (due at the handle's first verb) or
// for its own statement, a grouped verb and an Update alike. Before, a
// wait for the mark's write ended by the context was ErrBusy, saying the
// lock was held past the minute-long busy timeout. A wait the context does
// not end lasts that minute: the bound is half of it, a cap for a loaded
// machine, not a speed target.
func TestBusyWaitEndsWithTheContext(t *testing.T) {
	for _, markDue := range []bool{true, false} {
		t.Run(map[bool]string{true: "mark due", false: "mark written"}[markDue], func(t *testing.T) {
			for _, name := range []string{"incr", "update"} {
				path := filepath.Join(t.TempDir(), name+".state")
				db, err := state.Open(path, state.WithBusyTimeout(time.Minute), state.WithoutBackground())
				require.NoError(t, err)
				if !markDue {
					require.NoError(t, db.Set(t.Context(), "warmup", 1))
				}
				release := holdWriteLock(t, path)
				ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
				began := time.Now()
				if name == "incr" {
					_, err = db.Incr(ctx, "n")
				} else {
					err = db.Update(ctx, func(tx *state.Tx) error { return tx.Set("k", 1) })
				}
				took := time.Since(began)
				cancel()
				release() // before Close, which would wait for it
				require.NoError(t, db.Close())
				require.ErrorIs(t, err, context.DeadlineExceeded, name)
				assert.NotErrorIs(t, err, state.ErrBusy, "%s: no connection held the lock past the busy timeout", name)
				assert.Less(t, took, 30*time.Second, "%s: the context ends the wait, not the minute-long busy timeout", name)
			}
		})
	}
}

// TestOpenBesideALockedRollbackFileWaitsOneBudget: beside another program
// that switched the file to a rollback journal and holds it in an
// exclusive transaction, Open fails with ErrBusy after one busy timeout.
// Before, the failed Open's clean-up began a read to guard connections it
// had never opened, and waited a second timeout for it. SQLite's busy
// handler sleeps out the whole timeout before it reports the file busy, so
// two budgets take twice the timeout at least on any machine: the bound is
// that, and one budget has a whole timeout of slack for a loaded machine.
func TestOpenBesideALockedRollbackFileWaitsOneBudget(t *testing.T) {
	const timeout = 4 * time.Second
	path := filepath.Join(t.TempDir(), "rollback.state")
	db, err := state.Open(path)
	require.NoError(t, err)
	require.NoError(t, db.Set(t.Context(), "k", "v"))
	require.NoError(t, db.Close())

	raw, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	conn, err := raw.Conn(t.Context())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(t.Context(), `PRAGMA journal_mode=delete`)
	require.NoError(t, err)
	_, err = conn.ExecContext(t.Context(), `BEGIN EXCLUSIVE`)
	require.NoError(t, err)
	defer conn.ExecContext(context.Background(), `ROLLBACK`)

	began := time.Now()
	db, err = state.Open(path, state.WithBusyTimeout(timeout))
	took := time.Since(began)
	if db != nil {
		db.Close()
	}
	require.ErrorIs(t, err, state.ErrBusy)
	t.Logf("Open failed after %v (busy timeout %v)", took, timeout)
	assert.Less(t, took, 2*timeout, "one budget for the whole Open, not two")
}
