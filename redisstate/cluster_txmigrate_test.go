package redisstate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// migratingKey sets key to 1, then leaves its slot migrating from its
// master to another with the key already moved there, as in the middle
// of a resharding: the old master answers ASK for it. It returns the old
// master and the new.
func (tc *testCluster) migratingKey(key string) (from, to string) {
	tc.t.Helper()
	rkey := tc.s.keyOf(key)
	require.NoError(tc.t, tc.s.Set(tc.ctx, key, state.IntValue(1), 0))
	from = tc.owner(rkey)
	to = tc.other(from)
	tc.beginMigration(rkey, from, to)
	host, port, err := net.SplitHostPort(to)
	require.NoError(tc.t, err)
	tc.cmd(from, "MIGRATE", host, port, rkey, "0", "5000")
	return from, to
}

// incr is an Update's callback that adds 1 to key, counting its runs.
func incr(key string, runs *atomic.Int32) func(any) error {
	return func(x any) error {
		runs.Add(1)
		_, err := x.(*tx).IncrBy(key, 1, 0)
		return err
	}
}

// TestClusterUpdateWaitsForItsSlotToMove: an Update whose slot is
// migrating (its key already on the importing master, so the old one
// answers ASK) waits for the migration to end and then runs once on the
// new master. The migration is ended by another goroutine only after the
// Update met a redirect more times than a verb follows one
// (redirectTries): before, the Update failed at the eighth with
// ErrUnavailable. The callback ran twice: once before the wait, and once
// on the new master; the attempts in between stopped at their first read
// (of the key the first run read, txprefetch.go), before it.
func TestClusterUpdateWaitsForItsSlotToMove(t *testing.T) {
	tc := newTestCluster(t, "u:")
	s, ctx := tc.s, tc.ctx
	s.migrationWait = time.Minute // a cap for a loaded machine: the goroutine ends the migration
	rkey := s.keyOf("{u}x")
	_, to := tc.migratingKey("{u}x")

	const waited = 2 * redirectTries
	var pauses atomic.Int32
	ready, done := make(chan struct{}), make(chan struct{})
	s.pause = func(ctx context.Context, d time.Duration) error {
		if pauses.Add(1) == waited {
			close(ready)
		}
		return sleep(ctx, d)
	}
	ended := make(chan error, 1)
	go func() {
		select {
		case <-ready:
		case <-done:
			ended <- errors.New("the Update returned before it waited")
			return
		}
		ended <- endMigration(tc.c, rkey, to)
	}()

	var runs atomic.Int32
	err := s.Update(ctx, incr("{u}x", &runs))
	close(done)
	require.NoError(t, err, "the Update waited for the migration and ran on the new master")
	require.NoError(t, <-ended)
	assert.GreaterOrEqual(t, pauses.Load(), int32(waited))
	assert.EqualValues(t, 2, runs.Load(), "the callback ran before the wait and once on the new master")
	assert.Equal(t, "i:2", tc.cmd(to, "GET", rkey), "incremented once, on the new master")
}

// endMigration gives rkey's slot to the master to on every master, as
// testCluster.endMigration does, from any goroutine.
func endMigration(c *redistest.Cluster, rkey, to string) error {
	pw := c.Servers[0].Password()
	id, err := redistest.CommandText(to, pw, "CLUSTER", "MYID")
	if err != nil {
		return err
	}
	sl := strconv.Itoa(slot(rkey))
	if _, err := redistest.CommandText(to, pw, "CLUSTER", "SETSLOT", sl, "NODE", id); err != nil {
		return err
	}
	for _, a := range c.Addrs() {
		if a != to {
			if _, err := redistest.CommandText(a, pw, "CLUSTER", "SETSLOT", sl, "NODE", id); err != nil {
				return fmt.Errorf("%s: %w", a, err)
			}
		}
	}
	return nil
}

// TestClusterUpdateWaitingForItsSlotEndsWithItsContext: an Update waiting
// for its slot's migration to end returns its context's error when the
// context ends first, saying what it waited for, and applies nothing:
// cancelled (after more redirects than a verb follows: before, it failed
// at the eighth with ErrUnavailable), or past its deadline.
func TestClusterUpdateWaitingForItsSlotEndsWithItsContext(t *testing.T) {
	tc := newTestCluster(t, "c:")
	s := tc.s
	s.migrationWait = time.Minute
	rkey := s.keyOf("{c}x")
	_, to := tc.migratingKey("{c}x")

	ctx, cancel := context.WithCancel(tc.ctx)
	defer cancel()
	pauses := 0
	s.pause = func(ctx context.Context, d time.Duration) error {
		if pauses++; pauses == 2*redirectTries {
			cancel()
		}
		return sleep(ctx, d)
	}
	var runs atomic.Int32
	err := s.Update(ctx, incr("{c}x", &runs))
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, state.ErrUnavailable)
	assert.Contains(t, err.Error(), "to finish moving between masters")
	assert.Equal(t, 2*redirectTries, pauses)

	s.pause = sleep
	dctx, dcancel := context.WithTimeout(tc.ctx, 300*time.Millisecond)
	defer dcancel()
	err = s.Update(dctx, incr("{c}x", &runs))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, state.ErrUnavailable)

	tc.endMigration(rkey, to)
	assert.Equal(t, "i:1", tc.cmd(to, "GET", rkey), "nothing applied")
}

// TestClusterUpdateWaitsForItsSlotUpToABound: an Update whose slot stays
// migrating fails with ErrUnavailable saying so once the store's
// migrationWait has passed (not before), having applied nothing; the
// bound is the verbs' default busy timeout.
func TestClusterUpdateWaitsForItsSlotUpToABound(t *testing.T) {
	tc := newTestCluster(t, "b:")
	s, ctx := tc.s, tc.ctx
	assert.Equal(t, state.DefaultBusyTimeout, s.migrationWait, "the default bound")
	const bound = 500 * time.Millisecond
	s.migrationWait = bound
	rkey := s.keyOf("{b}x")
	from, to := tc.migratingKey("{b}x")

	var runs atomic.Int32
	start := time.Now()
	err := s.Update(ctx, incr("{b}x", &runs))
	took := time.Since(start)
	require.ErrorIs(t, err, state.ErrUnavailable)
	assert.NotErrorIs(t, err, state.ErrBusy)
	assert.Contains(t, err.Error(), fmt.Sprintf("cluster slot %d was still migrating", slot(rkey)))
	assert.Contains(t, err.Error(), "redis at "+from, "names the master that answered ASK")
	assert.GreaterOrEqual(t, took, bound, "it waited the whole bound")
	assert.EqualValues(t, 1, runs.Load(), "the waiting attempts stopped at their first read, before the callback")
	tc.endMigration(rkey, to)
	assert.Equal(t, "i:1", tc.cmd(to, "GET", rkey), "nothing applied")
}

// TestClusterUpdateWaitsForItsSlotAsLongAsTheBusyTimeout: the bound on an
// Update's wait for its migrating slot is the handle's WithBusyTimeout,
// passed from state.Open through the backend's options; zero never waits.
// Before, the wait was a fixed 5 s whatever the option said.
func TestClusterUpdateWaitsForItsSlotAsLongAsTheBusyTimeout(t *testing.T) {
	tc := newTestCluster(t, "w:")
	ctx := tc.ctx
	rkey := tc.s.keyOf("{w}x")
	_, to := tc.migratingKey("{w}x")
	for _, bound := range []time.Duration{0, 300 * time.Millisecond} {
		db, err := state.Open(tc.c.URL("w:"), state.WithoutBackground(), state.WithBusyTimeout(bound))
		require.NoError(t, err)
		runs := 0
		start := time.Now()
		err = db.Update(ctx, func(x *state.Tx) error {
			runs++
			_, err := x.Incr("{w}x")
			return err
		})
		took := time.Since(start)
		require.ErrorIs(t, err, state.ErrUnavailable, "busy timeout %v", bound)
		assert.Contains(t, err.Error(), fmt.Sprintf("cluster slot %d was still migrating", slot(rkey)))
		assert.Contains(t, err.Error(), fmt.Sprintf("waits up to %v for a move to end", bound), "the bound is the busy timeout")
		assert.GreaterOrEqual(t, took, bound, "it waited the whole bound")
		assert.Equal(t, 1, runs, "busy timeout %v: the callback ran once, before the wait", bound)
		require.NoError(t, db.Close())
	}
	tc.endMigration(rkey, to)
	assert.Equal(t, "i:1", tc.cmd(to, "GET", rkey), "nothing applied")
}

// TestClusterUpdatesDuringAResharding: transactions of several goroutines
// increment keys of one slot while another goroutine moves the slot to
// another master key by key, as redis-cli --cluster reshard does. Every
// Update succeeds, on the old master or, once its keys moved, on the new
// one, and the counters add up exactly: no increment was lost or applied
// twice.
func TestClusterUpdatesDuringAResharding(t *testing.T) {
	tc := newTestCluster(t, "h:")
	s, ctx := tc.s, tc.ctx
	s.migrationWait = time.Minute // a cap for a loaded machine
	const nkeys, workers = 20, 4
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("{h}k%02d", i)
		require.NoError(t, s.Set(ctx, keys[i], state.IntValue(0), 0))
	}
	rkey0 := s.keyOf(keys[0])
	from := tc.owner(rkey0)
	to := tc.other(from)

	var (
		moved   = make(chan struct{})
		started sync.WaitGroup
		wg      sync.WaitGroup
		ok      atomic.Int64
		errs    = make(chan error, workers)
	)
	started.Add(workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var runs atomic.Int32
			after := 0 // Updates begun after the slot moved
			signal := sync.OnceFunc(started.Done)
			for i := 0; ; i++ {
				select {
				case <-moved:
					if after++; after > 5 {
						return
					}
				default:
				}
				err := s.Update(ctx, incr(keys[(w*7+i)%nkeys], &runs))
				if err != nil {
					errs <- err
				} else {
					ok.Add(1)
				}
				if i == 4 || err != nil {
					signal() // five Updates done, before the slot moves
				}
				if err != nil {
					return
				}
			}
		}()
	}

	started.Wait() // every worker has committed some increments
	tc.beginMigration(rkey0, from, to)
	host, port, err := net.SplitHostPort(to)
	require.NoError(t, err)
	for _, k := range keys {
		tc.cmd(from, "MIGRATE", host, port, s.keyOf(k), "0", "5000")
	}
	tc.endMigration(rkey0, to)
	close(moved)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("an Update during the resharding: %v", err)
	}

	var sum int64
	for _, k := range keys {
		v := tc.cmd(to, "GET", s.keyOf(k))
		n, err := strconv.ParseInt(v[len("i:"):], 10, 64)
		require.NoError(t, err, "%s: %q", k, v)
		sum += n
	}
	assert.Equal(t, ok.Load(), sum, "every committed increment applied once")
	assert.Equal(t, "0", tc.cmd(from, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot(rkey0))))
}
