package state_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVerbsEndAtTheirDeadlineBehindAStuckVerb: while a verb of the handle
// holds its lock and does not finish (here an Update whose function
// blocks; on the real kernel, a sync on a disk that stalls), every other
// verb with a deadline returns its context's error without waiting for
// it: reads, Update and the queued verbs alike. The writes that gave up
// never ran, and once the stuck verb ends the handle works.
func TestVerbsEndAtTheirDeadlineBehindAStuckVerb(t *testing.T) {
	db, err := state.Open(filepath.Join(t.TempDir(), "app.state"))
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	require.NoError(t, db.Set(ctx, "a", 1))
	inside, release := make(chan struct{}), make(chan struct{})
	stuck := make(chan error, 1)
	go func() {
		stuck <- db.Update(ctx, func(tx *state.Tx) error {
			close(inside)
			<-release
			return tx.Set("stuck", 1)
		})
	}()
	<-inside
	verbs := map[string]func(context.Context) error{
		"Get":   func(c context.Context) error { _, err := db.Get(c, "a"); return err },
		"TTL":   func(c context.Context) error { _, err := db.TTL(c, "a"); return err },
		"Set":   func(c context.Context) error { return db.Set(c, "set", 1) },
		"Incr":  func(c context.Context) error { _, err := db.Incr(c, "incr"); return err },
		"Del":   func(c context.Context) error { _, err := db.Del(c, "a"); return err },
		"Lease": func(c context.Context) error { _, err := db.Lease(c, "job", "o", time.Minute); return err },
		"Update": func(c context.Context) error {
			return db.Update(c, func(tx *state.Tx) error { return tx.Set("update", 1) })
		},
	}
	for name, verb := range verbs {
		c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		answer := make(chan error, 1)
		go func() { answer <- verb(c) }()
		select {
		case err := <-answer:
			assert.ErrorIs(t, err, context.DeadlineExceeded, "%s behind the stuck verb", name)
		case <-time.After(time.Minute):
			t.Errorf("%s with a 20 ms deadline still waits for the stuck verb after a minute", name)
		}
		cancel()
	}
	close(release)
	require.NoError(t, <-stuck)
	for _, key := range []string{"set", "incr", "update"} {
		_, err := db.Get(ctx, key)
		assert.ErrorIs(t, err, state.ErrNotFound, "%s: a write that gave up never ran", key)
	}
	v, err := db.Get(ctx, "a")
	require.NoError(t, err, "Del gave up")
	assert.Equal(t, "1", v.String())
	n, err := db.Incr(ctx, "incr")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
}

// TestDeadlinesInTheQueueLoseNoCaller: goroutines increment one key with
// deadlines drawn from 0 to 2 ms, so that queued verbs leave the queue
// while others lead and are appointed: every call returns (no queue is
// left without a leader), the counter is at least the increments that
// succeeded and at most those called, and the handle goes on.
func TestDeadlinesInTheQueueLoseNoCaller(t *testing.T) {
	db, err := state.Open(filepath.Join(t.TempDir(), "app.state"))
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	const goroutines, calls = 8, 400
	var ok, gaveUp atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range calls {
				c, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(2000))*time.Microsecond)
				_, err := db.Incr(c, "n")
				cancel()
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					gaveUp.Add(1)
				default:
					t.Errorf("incr: %v", err)
					return
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(5 * time.Minute):
		t.Fatalf("callers still waiting after 5 minutes: %d answered, %d gave up", ok.Load(), gaveUp.Load())
	}
	v, err := db.Get(ctx, "n")
	require.NoError(t, err)
	n, _ := v.Int()
	assert.GreaterOrEqual(t, n, ok.Load())
	assert.LessOrEqual(t, n, int64(goroutines*calls))
	t.Logf("%d answered, %d gave up, counter %d", ok.Load(), gaveUp.Load(), n)
	_, err = db.Incr(ctx, "n")
	require.NoError(t, err)
}
