package redisstate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClusterMasterKilled: goroutines increment keys spread over a
// three-master cluster and grant a lease, while one master is SIGKILLed
// and restarted from its append-only file (appendfsync always): the
// master that holds the lease. Every
// increment acknowledged is in the final count, and nothing else is but
// increments whose outcome the store said was unknown: an error that says
// "not applied" (ErrUnavailable) must mean it. Every token granted is
// higher than every token granted before it whose release was
// acknowledged, across the restart (a lost release leaves the owner's lease
// live, and asking again keeps its token). The test
// runs to a count of work (increments before, during and after the outage)
// under a generous cap, whatever the machine's speed.
func TestClusterMasterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster takes seconds to start")
	}
	c := redistest.StartCluster(t, 3)
	db := openURL(t, c.URL("kill:"))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	const keys, workers = 24, 6
	type tally struct{ acked, unknown, refused, after atomic.Int64 }
	counts := make([]tally, keys)
	var (
		phase      atomic.Int32 // 0 before the kill, 1 while down, 2 after the restart
		afterOK    atomic.Int64 // increments acknowledged after the restart
		beforeOK   atomic.Int64
		failedDown atomic.Int64 // errors while the master was down
	)
	incr := func(i int) {
		vctx, vcancel := context.WithTimeout(ctx, 2*time.Second)
		defer vcancel()
		_, err := db.Incr(vctx, fmt.Sprintf("k%02d", i))
		switch {
		case err == nil:
			counts[i].acked.Add(1)
			switch phase.Load() {
			case 0:
				beforeOK.Add(1)
			case 2:
				afterOK.Add(1)
				counts[i].after.Add(1)
			}
		case errors.Is(err, state.ErrUnavailable) && !errors.Is(err, state.ErrOutcomeUnknown):
			counts[i].refused.Add(1)
			failedDown.Add(1)
		default:
			counts[i].unknown.Add(1)
			failedDown.Add(1)
		}
	}
	// grants are the leases granted, in order (one goroutine grants), each
	// with whether its release was acknowledged.
	type granted struct {
		token    int64
		released bool
	}
	var grants []granted
	var tokMu sync.Mutex
	grant := func() {
		vctx, vcancel := context.WithTimeout(ctx, 2*time.Second)
		defer vcancel()
		l, err := db.Lease(vctx, "job", "w", time.Minute)
		if err != nil {
			return
		}
		err = db.Release(vctx, l)
		tokMu.Lock()
		grants = append(grants, granted{l.Token, err == nil})
		tokMu.Unlock()
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for n := w; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if ctx.Err() != nil {
					return
				}
				incr(n % keys)
				if w == 0 && n%10 == 0 {
					grant()
				}
			}
		})
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				close(stop)
				wg.Wait()
				t.Fatalf("the 3-minute cap passed waiting for %s (before %d, after %d acknowledged, %d failed while down)",
					what, beforeOK.Load(), afterOK.Load(), failedDown.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("500 increments before the kill", func() bool { return beforeOK.Load() >= 500 })
	// The victim is the master that holds the lease, so its tokens cross
	// the restart.
	var victim *redistest.Server
	for _, srv := range c.Servers {
		if out, err := srv.Command("EXISTS", "kill:lease:job"); err == nil && out == ":1" {
			victim = srv
		}
	}
	require.NotNil(t, victim, "no master holds the lease")
	phase.Store(1)
	victim.Kill()
	waitFor("20 failed calls while a master is down", func() bool { return failedDown.Load() >= 20 })
	victim.Restart()
	phase.Store(2)
	// The restarted master serves its slots again once the cluster agrees
	// it is back: every key, on every master, takes increments again.
	waitFor("20 increments of every key after the restart", func() bool {
		for i := range keys {
			if counts[i].after.Load() < 20 {
				return false
			}
		}
		return true
	})
	close(stop)
	wg.Wait()

	for i := range keys {
		k := fmt.Sprintf("k%02d", i)
		v, err := db.Get(ctx, k)
		require.NoError(t, err, k)
		n, ok := v.Int()
		require.True(t, ok, k)
		acked, unknown := counts[i].acked.Load(), counts[i].unknown.Load()
		assert.GreaterOrEqual(t, n, acked, "%s: every acknowledged increment counted", k)
		assert.LessOrEqual(t, n, acked+unknown, "%s: at most the unknown ones besides (%d refused as not applied)", k, counts[i].refused.Load())
	}
	// A grant after an acknowledged release has a higher token. After a
	// release that failed (the master died under it, or it was never
	// sent) the lease may still be live and held by the same owner, and
	// asking again extends it with the same token, as the file engine
	// does; never a lower one.
	require.NotEmpty(t, grants)
	kept := 0
	for i := 1; i < len(grants); i++ {
		prev, cur := grants[i-1], grants[i]
		if prev.released {
			assert.Greater(t, cur.token, prev.token, "grant %d after %d, released", i, i-1)
		} else {
			assert.GreaterOrEqual(t, cur.token, prev.token, "grant %d after %d, not released", i, i-1)
			if cur.token == prev.token {
				kept++
			}
		}
	}
	t.Logf("%d increments acknowledged before the kill, %d after the restart, %d failed while down; %d grants, tokens %d..%d, %d kept by the same owner after a lost release",
		beforeOK.Load(), afterOK.Load(), failedDown.Load(), len(grants), grants[0].token, grants[len(grants)-1].token, kept)
}
