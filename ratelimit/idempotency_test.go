package ratelimit_test

// Idempotency keys, the third recipe: a request carries a key, and the first
// caller to claim it does the work; every other caller, in any goroutine or
// process, sees it claimed. The claim is one verb, CAS with nil expected and
// a TTL (Redis's SET NX PX):
//
//	claimed, err := db.CAS(ctx, "idem:"+key, nil, requestID, state.TTL(24*time.Hour))
//
// The tests live here, beside the limiters' exactness tests, because they
// fire the same load through the same worker processes (fire, runChild).

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/ratelimit"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/require"
)

// claimer is an idempotency-key claim shaped as a Limiter, so that the
// limiters' workers run it: Allowed means this caller claimed the key.
type claimer struct {
	db    *state.DB
	naive bool // Get, then Set if absent: the version to be shown wrong
	ttl   time.Duration
	seq   atomic.Int64 // the value each claim writes: its claimer's own
}

func newClaimer(db *state.DB, naive bool, ttl time.Duration) *claimer {
	return &claimer{db: db, naive: naive, ttl: ttl}
}

func (c *claimer) Allow(ctx context.Context, key string) (ratelimit.Decision, error) {
	return c.AllowN(ctx, key, 1)
}

func (c *claimer) AllowN(ctx context.Context, key string, _ int64) (ratelimit.Decision, error) {
	k := "idem:" + key
	me := fmt.Sprintf("%s:%d", c.db.Path(), c.seq.Add(1))
	if !c.naive {
		ok, err := c.db.CAS(ctx, k, nil, me, state.TTL(c.ttl))
		return ratelimit.Decision{Allowed: ok}, err
	}
	_, err := c.db.Get(ctx, k)
	switch {
	case err == nil:
		return ratelimit.Decision{}, nil // claimed by someone else
	case !errors.Is(err, state.ErrNotFound):
		return ratelimit.Decision{}, err
	}
	// The gap: another caller may have found it absent too.
	return ratelimit.Decision{Allowed: true}, c.db.Set(ctx, k, me, state.TTL(c.ttl))
}

// requireOneClaimPerKey has procs x goroutines callers each claim the same
// requests keys under prefix key, on the store at path, and requires
// exactly one claim per key: every key holds a claim, which only a CAS
// that won writes, and requests claims won in all, so none has two.
func requireOneClaimPerKey(t *testing.T, path string) {
	j := job{Kind: "claim", Path: path, Key: "order", Window: 24 * time.Hour, Procs: procs,
		Goroutines: goroutines, Requests: requests, PerRequest: true}
	got := fire(t, procs, j)
	require.Equal(t, int64(total), got.Allowed+got.Refused, "every claim answered")
	db, err := state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	for i := range requests {
		_, err := db.Get(t.Context(), fmt.Sprintf("idem:order:%d", i))
		require.NoError(t, err, "key %d: no claim won", i)
	}
	require.Equal(t, int64(requests), got.Allowed, "one claim per key of %d, each claimed by %d callers", requests, procs*goroutines)
}

// TestProcessesClaimEachIdempotencyKeyOnce: 4 processes of 4 goroutines
// claim the same 40 keys (640 claims, 16 per key) with CAS(nil, v, TTL):
// exactly 40 win, one per key.
func TestProcessesClaimEachIdempotencyKeyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	requireOneClaimPerKey(t, filepath.Join(t.TempDir(), "shared.state"))
}

// TestProcessesClaimEachIdempotencyKeyOnceOnRedis is the same over a real
// redis-server: CAS with a TTL is one script there.
func TestProcessesClaimEachIdempotencyKeyOnceOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	srv := redistest.Start(t)
	requireOneClaimPerKey(t, srv.URL("idem:"))
}

// TestNaiveGetThenSetClaimsTwice fires the same claims through Get, then
// Set if absent, and requires some key claimed twice (more than 40 claims
// won). Double claims are a race, so a run that has none by chance runs
// again on new keys, up to 20 runs; the test says how many it took.
func TestNaiveGetThenSetClaimsTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "shared.state")
	for attempt := 1; attempt <= 20; attempt++ {
		j := job{Kind: "naive-claim", Path: path, Key: fmt.Sprintf("order-%d", attempt), Window: 24 * time.Hour,
			Procs: procs, Goroutines: goroutines, Requests: requests, PerRequest: true}
		got := fire(t, procs, j)
		require.Equal(t, int64(total), got.Allowed+got.Refused)
		if got.Allowed > requests {
			t.Logf("run %d: Get then Set won %d claims on %d keys: %d double claims", attempt, got.Allowed, requests, got.Allowed-requests)
			return
		}
		t.Logf("run %d: %d claims on %d keys, none doubled by chance: again", attempt, got.Allowed, requests)
	}
	t.Fatal("20 runs of Get then Set never claimed a key twice")
}
