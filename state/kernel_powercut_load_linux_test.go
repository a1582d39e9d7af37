//go:build linux

package state_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/require"
)

// The load of the power-cut tests on one handle, and what it was answered.

// powerCutWorkers is how many goroutines grant leases, as many grant
// inside Update, and as many increment.
const powerCutWorkers = 3

// powerCutResult is what one round's verbs were answered.
type powerCutResult struct {
	mu       sync.Mutex       // guards granted
	granted  map[string]int64 // the highest token acknowledged per name
	grants   atomic.Int64     // grants acknowledged
	called   atomic.Int64     // increments called
	acked    atomic.Int64     // the highest value an increment returned
	durable  atomic.Int64     // the highest value returned before an acknowledged grant was called
	unsynced string           // the file written without a sync just before the cut (writeUnsynced)
}

// newPowerCutResult starts a round on a counter that holds n.
func newPowerCutResult(n int64) *powerCutResult {
	r := &powerCutResult{granted: map[string]int64{}}
	r.acked.Store(n)
	r.durable.Store(n)
	return r
}

// snapshot copies what had been acknowledged so far: every answer in the
// copy came before the call.
func (r *powerCutResult) snapshot() *powerCutResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := newPowerCutResult(0)
	for name, token := range r.granted {
		c.granted[name] = token
	}
	c.grants.Store(r.grants.Load())
	c.called.Store(r.called.Load())
	c.acked.Store(r.acked.Load())
	c.durable.Store(r.durable.Load())
	return c
}

// grantAcked records a grant of token on name, called when the counter's
// highest acknowledged value was before.
func (r *powerCutResult) grantAcked(name string, token, before int64) {
	r.mu.Lock()
	r.granted[name] = max(r.granted[name], token)
	r.mu.Unlock()
	raise(&r.durable, before)
	r.grants.Add(1)
}

// raise sets a to v if v is higher.
func raise(a *atomic.Int64, v int64) {
	for old := a.Load(); old < v && !a.CompareAndSwap(old, v); old = a.Load() {
	}
}

// grantKinds are the ways a load grants leases.
type grantKinds int

const (
	leaseGrants  grantKinds = 1 << iota // Lease, then Release
	updateGrants                        // Lease and Release inside Update: it commits, then the engine syncs the WAL itself
	bothGrants   = leaseGrants | updateGrants
)

// String names the kinds for a log.
func (k grantKinds) String() string {
	switch k {
	case leaseGrants:
		return "Lease"
	case updateGrants:
		return "Update"
	}
	return "Lease and Update"
}

// powerCutLoad runs, on db, powerCutWorkers goroutines of each kind: grants
// of each of kinds, and increments of "n", each followed by a Set of
// "seen" to the value it returned. Each holds gate around every
// verb and stops at its first error, which it hands to stop, or before its
// next verb once quit is set. wait waits for all of them.
func powerCutLoad(ctx context.Context, db *state.DB, round int, kinds grantKinds, r *powerCutResult, gate sync.Locker, quit *atomic.Bool, stop func(error)) (wait func()) {
	var wg sync.WaitGroup
	for g := range powerCutWorkers {
		if kinds&leaseGrants != 0 {
			wg.Go(func() {
				name := fmt.Sprintf("r%d-job%d", round, g)
				for i := 0; !quit.Load(); i++ {
					gate.Lock()
					before := r.acked.Load()
					l, err := db.Lease(ctx, name, fmt.Sprintf("o%d", i), time.Minute)
					gate.Unlock()
					if err != nil {
						stop(err)
						return
					}
					r.grantAcked(name, l.Token, before)
					gate.Lock()
					err = db.Release(ctx, l)
					gate.Unlock()
					if err != nil {
						stop(err)
						return
					}
				}
			})
		}
		if kinds&updateGrants != 0 {
			wg.Go(func() {
				name := fmt.Sprintf("r%d-tx%d", round, g)
				for i := 0; !quit.Load(); i++ {
					gate.Lock()
					before := r.acked.Load()
					var token int64
					err := db.Update(ctx, func(tx *state.Tx) error {
						l, err := tx.Lease(name, fmt.Sprintf("o%d", i), time.Minute)
						if err != nil {
							return err
						}
						token = l.Token
						return tx.Release(l)
					})
					gate.Unlock()
					if err != nil {
						stop(err)
						return
					}
					r.grantAcked(name, token, before)
				}
			})
		}
		wg.Go(func() {
			for !quit.Load() {
				gate.Lock()
				r.called.Add(1)
				v, err := db.Incr(ctx, "n")
				gate.Unlock()
				if err != nil {
					stop(err)
					return
				}
				raise(&r.acked, v)
				// A later commit: where it survives, the increment
				// before it must (openAfterCut).
				gate.Lock()
				err = db.Set(ctx, "seen", v)
				gate.Unlock()
				if err != nil {
					stop(err)
					return
				}
			}
		})
	}
	return wg.Wait
}

// openAfterCut opens the file at path after a power cut, checks it clean
// and that what survived is a prefix of the commits ("seen", set after an
// increment returned it, is not ahead of the counter), and returns each
// lease name's token and the counter "n" (0 when unset).
func openAfterCut(t *testing.T, ctx context.Context, path string, round int) (tokens map[string]int64, n int64) {
	t.Helper()
	db, err := state.Open(path)
	require.NoError(t, err, "round %d: open after the cut", round)
	defer func() { require.NoError(t, db.Close()) }()
	findings, err := db.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, findings, "round %d", round)
	tokens = map[string]int64{}
	require.NoError(t, db.Leases(ctx, true, func(l state.LeaseInfo) error {
		tokens[l.Name] = l.Token
		return nil
	}))
	n = getInt(t, ctx, db, "n")
	seen := getInt(t, ctx, db, "seen")
	require.LessOrEqual(t, seen, n, "round %d: the Set after the increment that returned %d survived, the increment did not", round, seen)
	return tokens, n
}

// getInt reads the integer at key, 0 when there is none.
func getInt(t *testing.T, ctx context.Context, db *state.DB, key string) int64 {
	t.Helper()
	v, err := db.Get(ctx, key)
	if errors.Is(err, state.ErrNotFound) {
		return 0
	}
	require.NoError(t, err)
	i, ok := v.Int()
	require.True(t, ok, "%s holds an integer: %v", key, v)
	return i
}

// noGate is the gate of a load whose verbs may be in flight at the cut.
type noGate struct{}

func (noGate) Lock()   {}
func (noGate) Unlock() {}

// waitUntilCap bounds waitUntil. The counts a round waits for are up to
// 8,000 verbs, which a loaded 2-core machine syncing each commit on a loop
// device made at about 2,100 a minute: the cap is many times that, a bound
// on a hang, not on the machine's speed.
const waitUntilCap = 15 * time.Minute

// waitUntil waits until count reaches want or stopped says so, for
// waitUntilCap at most: past it, it fails the round's test, saying how many
// of what there were.
func waitUntil(t *testing.T, round int, what string, want int64, count func() int64, stopped func() bool) {
	t.Helper()
	for giveUp := time.Now().Add(waitUntilCap); count() < want && !stopped(); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(giveUp) {
			t.Errorf("round %d: %d %s in %v, not %d", round, count(), what, waitUntilCap, want)
			return
		}
	}
}

// helperOpen opens path for a helper process with the default options and
// says "ready"; nil, after saying why on stderr, if it cannot.
func helperOpen(path string) *state.DB {
	db, err := state.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return nil
	}
	fmt.Println("ready")
	return db
}

// powerCutBatch is a helper process's batch: it grants the lease name to
// owner "o<i>", releases it and increments "n" three times, counting the
// increments it calls in called (when not nil). It returns the grant's
// token and the last increment's value.
func powerCutBatch(ctx context.Context, db *state.DB, name string, i int, called *int) (token, v int64, err error) {
	l, err := db.Lease(ctx, name, fmt.Sprintf("o%d", i), time.Minute)
	if err != nil {
		return 0, 0, err
	}
	if err := db.Release(ctx, l); err != nil {
		return 0, 0, err
	}
	for range 3 {
		if called != nil {
			*called++
		}
		if v, err = db.Incr(ctx, "n"); err != nil {
			return 0, 0, err
		}
	}
	return l.Token, v, nil
}

// unsynced is what a power-cut test writes to a file of its own just
// before a cut, without a sync (writeUnsynced).
var unsynced = make([]byte, 64<<10)

// writeUnsynced writes unsynced to a new file in dir named for cut, and
// returns its path: the cut must take it back (unsyncedGone), which shows
// the cut is a power cut, not a copy of what the page cache holds. A new
// file each cut: ext4 writes out a file truncated and written again at
// its close (auto_da_alloc).
func writeUnsynced(t *testing.T, dir string, cut int) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("unsynced-%d", cut))
	require.NoError(t, os.WriteFile(path, unsynced, 0o600))
	return path
}

// unsyncedGone requires the file writeUnsynced wrote at path to be gone
// after the cut, or shorter.
func unsyncedGone(t *testing.T, path string, round int) {
	t.Helper()
	if b, err := os.ReadFile(path); err == nil {
		require.Less(t, len(b), len(unsynced), "round %d: a file written just before the cut, never synced, is there after it", round)
	}
}
