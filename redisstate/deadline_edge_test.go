package redisstate_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Deadlines met at their exact millisecond. Redis keeps a key through its
// deadline's millisecond; statekit counts it gone from that millisecond
// on, on a file and over Redis alike (live while deadline > now), and a
// lease is free from its deadline's millisecond on. The scripts decide at
// the time they read, which a test cannot set, so it aims: it reads the
// server's time, lays out an item whose deadline is that time plus the
// milliseconds the last item's calls took, and meets it with one call.
// Every call's answer must agree with the time it noted; the test ends
// once exactHits calls met their items' deadlines at the exact
// millisecond. Aiming by the last item's pace hits often on a fast
// machine and a loaded one alike; the items are counted, not timed.

// exactHits is how many calls must meet their items' deadlines at the
// exact millisecond.
const exactHits = 3

// aimCap bounds the items laid out to meet them: a generous cap (three
// hits took under 30 items under the race detector beside two CPU hogs),
// not a speed target.
const aimCap = 5000

// aimAtDeadlines lays out items with setup (item i, its deadline at, on
// the raw client) and meets each with call, which reports whether the
// verb's answer found the item live: it must be live exactly while the
// time the verb noted is before at. check, when set, looks at the item
// after its call, through the store; its calls must take the times they
// note. It returns once exactHits calls met their items' deadlines at the
// exact millisecond. listing says call lists keys, which notes no time when
// Redis removed every key it would have listed.
func aimAtDeadlines(t *testing.T, rc *redis.Client, n *notes, listing bool,
	setup func(ctx context.Context, rc *redis.Client, i int, at int64) error,
	call func(i int) (live bool),
	check func(i int, live bool),
) {
	t.Helper()
	ctx := context.Background()
	gap, hits := int64(1), 0
	for i := 0; hits < exactHits; i++ {
		require.Less(t, i, aimCap, "%d calls met their items' deadlines at the exact millisecond, of %d", hits, exactHits)
		ref := serverMs(t, rc)
		at := ref + gap
		require.NoError(t, setup(ctx, rc, i, at))
		live := call(i)
		n.mu.Lock()
		silent := len(n.ms) == 0
		n.mu.Unlock()
		if silent && listing {
			// The listing read no page: Redis had removed the key, its
			// deadline past by Redis's own clock.
			require.False(t, live, "item %d listed without a page read", i)
			gap = max(1, serverMs(t, rc)-ref)
			continue
		}
		now := n.one(t, fmt.Sprintf("item %d", i))
		require.Equal(t, now < at, live, "item %d met at %d, its deadline %d", i, now, at)
		if check != nil {
			check(i, live)
		}
		if now == at {
			hits++
			t.Logf("item %d met its deadline at its millisecond", i)
		}
		gap = max(1, now-ref)
	}
}

// TestLeaseIsFreeAtItsDeadline: a grant at the exact millisecond a lease
// expires takes it, with a token one higher: a token is never granted
// twice.
func TestLeaseIsFreeAtItsDeadline(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))
	aimAtDeadlines(t, rc, &n, false, func(ctx context.Context, rc *redis.Client, i int, at int64) error {
		return rc.HSet(ctx, fmt.Sprintf("t:lease:L%d", i), "owner", "old", "token", "7", "expires", at).Err()
	}, func(i int) bool {
		l, err := db.Lease(ctx, fmt.Sprintf("L%d", i), "new", time.Minute)
		if errors.Is(err, state.ErrLeaseHeld) {
			return true
		}
		require.NoError(t, err)
		require.Equal(t, int64(8), l.Token, "L%d granted after token 7 expired", i)
		return false
	}, nil)
}

// TestDelCountsNoKeyAtItsDeadline: a Del at the exact millisecond of a
// key's deadline deletes it and counts none.
func TestDelCountsNoKeyAtItsDeadline(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))
	aimAtDeadlines(t, rc, &n, false, func(ctx context.Context, rc *redis.Client, i int, at int64) error {
		return rc.Do(ctx, "SET", fmt.Sprintf("t:k:d%d", i), "b:v", "PXAT", at).Err()
	}, func(i int) bool {
		deleted, err := db.Del(ctx, fmt.Sprintf("d%d", i))
		require.NoError(t, err)
		return deleted == 1
	}, nil)
}

// TestCASCreatesAtItsDeadline: a CAS that expects no value, at the exact
// millisecond of a key's deadline, swaps, and the value it stores has no
// deadline (a create has none): it does not keep the old key's.
func TestCASCreatesAtItsDeadline(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))
	aimAtDeadlines(t, rc, &n, false, func(ctx context.Context, rc *redis.Client, i int, at int64) error {
		return rc.Do(ctx, "SET", fmt.Sprintf("t:k:c%d", i), "b:old", "PXAT", at).Err()
	}, func(i int) bool {
		swapped, err := db.CAS(ctx, fmt.Sprintf("c%d", i), nil, "new")
		require.NoError(t, err)
		return !swapped
	}, func(i int, live bool) {
		if live {
			return
		}
		key := fmt.Sprintf("c%d", i)
		v, err := db.Get(ctx, key)
		require.NoError(t, err, "%s after the CAS that created it", key)
		assert.Equal(t, state.BytesValue([]byte("new")), v, key)
		n.one(t, "get")
		left, err := db.TTL(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, state.NoExpiry, left, "%s's deadline after the CAS that created it", key)
		n.one(t, "ttl")
	})
}

// TestExpireFindsNoKeyAtItsDeadline: an Expire at the exact millisecond of
// a key's deadline reports false and leaves the key gone: it does not give
// it a new deadline.
func TestExpireFindsNoKeyAtItsDeadline(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))
	aimAtDeadlines(t, rc, &n, false, func(ctx context.Context, rc *redis.Client, i int, at int64) error {
		return rc.Do(ctx, "SET", fmt.Sprintf("t:k:e%d", i), "b:v", "PXAT", at).Err()
	}, func(i int) bool {
		set, err := db.Expire(ctx, fmt.Sprintf("e%d", i), time.Minute)
		require.NoError(t, err)
		return set
	}, func(i int, live bool) {
		if live {
			return
		}
		key := fmt.Sprintf("e%d", i)
		_, err := db.Get(ctx, key)
		require.ErrorIs(t, err, state.ErrNotFound, "%s after an Expire that found it gone", key)
		n.one(t, "get")
	})
}

// TestScanLeavesOutAKeyAtItsDeadline: a Scan at the exact millisecond of a
// key's deadline does not list it; one before lists it with the time it
// has left.
func TestScanLeavesOutAKeyAtItsDeadline(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))
	var at int64
	aimAtDeadlines(t, rc, &n, true, func(ctx context.Context, rc *redis.Client, _ int, deadline int64) error {
		at = deadline
		return rc.Do(ctx, "SET", "t:k:s", "b:v", "PXAT", deadline).Err()
	}, func(int) bool {
		var listed []state.KeyInfo
		require.NoError(t, db.Scan(ctx, "s", false, func(k state.KeyInfo) error {
			listed = append(listed, k)
			return nil
		}))
		if len(listed) == 0 {
			return false
		}
		require.Len(t, listed, 1)
		assert.Equal(t, at, listed[0].Expires.UnixMilli(), "the listed key's deadline")
		assert.Positive(t, listed[0].Left, "a listed key's time left")
		return true
	}, nil)
}

// TestLeasesListALeaseFreeAtItsDeadline: a listing of leases at the exact
// millisecond of a lease's deadline shows it expired, not held.
func TestLeasesListALeaseFreeAtItsDeadline(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))
	aimAtDeadlines(t, rc, &n, false, func(ctx context.Context, rc *redis.Client, _ int, at int64) error {
		return rc.HSet(ctx, "t:lease:L", "owner", "old", "token", "7", "expires", at).Err()
	}, func(int) bool {
		var listed []state.LeaseInfo
		require.NoError(t, db.Leases(ctx, true, func(l state.LeaseInfo) error {
			listed = append(listed, l)
			return nil
		}))
		require.Len(t, listed, 1)
		if listed[0].Status == state.LeaseHeld {
			assert.Positive(t, listed[0].Left, "a held lease's time left")
			return true
		}
		assert.Equal(t, state.LeaseExpired, listed[0].Status)
		return false
	}, nil)
}
