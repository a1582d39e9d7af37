//go:build linux

package state_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	closeOpenRounds   = 8
	closeOpenMaxVerbs = 3000
)

// TestKernelPowerCutInCloseAndOpen: the disk stops (frozenDisk) in the
// middle of Close, whose last checkpoint copies the WAL into the file,
// syncs it and removes the WAL, and then in the middle of the Open that
// follows on the disk as that cut left it, which rewrites the WAL and the
// pages it names, syncs them and checkpoints. Each round, a handle with the
// default options grants (by Lease and by Update) and increments
// (powerCutLoad) until a random number of verbs, its goroutines stop, and
// Close runs; the disk stops after a random pause no longer than the
// round before's Close took. Close returns without an error (the disk only
// paused). On the disk as the cut left it, Open runs, and the disk stops
// after a random pause no longer than the round before's Open took. After
// each cut, mounted again, the file checks clean, every acknowledged grant
// has its token there, and the counter holds every increment acknowledged
// before an acknowledged grant was called, and no more than were called.
func TestKernelPowerCutInCloseAndOpen(t *testing.T) {
	disk := mountFreezable(t)
	rng := powerCutRand(t)
	path := filepath.Join(disk.dir, "app.state")
	ctx := t.Context()
	var n int64 // the counter as the last round's cuts left it
	lastClose, lastOpen := 10*time.Millisecond, 10*time.Millisecond
	for round := range closeOpenRounds {
		db, err := state.Open(path)
		require.NoError(t, err, "round %d", round)
		r := newPowerCutResult(n)
		var quit atomic.Bool
		errs := make(chan error, 3*powerCutWorkers)
		wait := powerCutLoad(ctx, db, round, bothGrants, r, noGate{}, &quit, func(err error) { errs <- err })
		verbs := func() int64 { return r.grants.Load() + r.acked.Load() - n }
		waitUntil(t, round, "verbs", int64(1+rng.IntN(closeOpenMaxVerbs)), verbs, func() bool { return len(errs) > 0 })
		quit.Store(true)
		wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}

		pause := randomPause(rng, lastClose)
		lastClose = cutDuring(t, disk, round, pause, func() error { return db.Close() })
		t.Logf("round %d: the cut came %v into Close, which took %v", round, pause, lastClose)
		disk.reboot(t, round)
		// No check here: opening the file would repair and checkpoint
		// it before the Open that is cut could. A commit the first cut
		// lost stays lost; the check after the second finds it.
		pause = randomPause(rng, lastOpen)
		lastOpen = cutDuring(t, disk, round, pause, func() error {
			db, err := state.Open(path)
			if err != nil {
				return err
			}
			return db.Close()
		})
		t.Logf("round %d: the cut came %v into Open, which with Close took %v", round, pause, lastOpen)
		disk.reboot(t, round)
		n = checkCloseOpenCut(t, ctx, path, round, r, n)
	}
}

// randomPause is a pause of up to twice last: a cut may come after the
// call returned, too.
func randomPause(rng *rand.Rand, last time.Duration) time.Duration {
	return time.Duration(rng.Int64N(2*int64(last) + 1))
}

// cutDuring runs fn, cuts the disk after pause, and requires fn to return
// without an error; it returns how long fn took, capped at 100 ms.
func cutDuring(t *testing.T, disk *frozenDisk, round int, pause time.Duration, fn func() error) time.Duration {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	took := atomic.Int64{}
	go func() {
		err := fn()
		took.Store(int64(time.Since(start)))
		done <- err
	}()
	time.Sleep(pause)
	disk.cut(t, round)
	require.NoError(t, <-done, "round %d: the disk only paused", round)
	return min(time.Duration(took.Load()), 100*time.Millisecond)
}

// checkCloseOpenCut checks the file at path after the cuts in Close and
// Open: every grant r holds, and the counter between r's durable floor and
// n and every increment called. It returns the counter.
func checkCloseOpenCut(t *testing.T, ctx context.Context, path string, round int, r *powerCutResult, n int64) int64 {
	t.Helper()
	tokens, got := openAfterCut(t, ctx, path, round)
	for name, token := range r.granted {
		assert.GreaterOrEqual(t, tokens[name], token, "round %d: %s was granted token %d and acknowledged", round, name, token)
	}
	assert.GreaterOrEqual(t, got, r.durable.Load(), "round %d: a durable increment was lost", round)
	assert.LessOrEqual(t, got, n+r.called.Load(), "round %d: more increments than were called", round)
	t.Logf("round %d: counter %d, %d acknowledged, durable floor %d", round, got, r.acked.Load(), r.durable.Load())
	return got
}
