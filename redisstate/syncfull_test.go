package redisstate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncWrite is one write verb, called on db; l is a copy of the lease
// "job", held by "a", for the verbs that need it.
type syncWrite struct {
	name  string
	lease bool // a lease grant: checked without SyncFull too
	call  func(ctx context.Context, db *state.DB, l *state.Lease) error
}

// syncWrites is every write verb, each on keys the seed wrote (so a write
// that got through would show), in an order every one of them can run in
// one after the other: the lease is renewed before it is released.
var syncWrites = []syncWrite{
	{name: "set", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error { return db.Set(ctx, "k", 2) }},
	{name: "set-new", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		return db.Set(ctx, "new", 1, state.TTL(time.Hour))
	}},
	{name: "del", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		_, err := db.Del(ctx, "gone")
		return err
	}},
	{name: "incr", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error { _, err := db.Incr(ctx, "n"); return err }},
	{name: "incrby", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		_, err := db.IncrBy(ctx, "n", 3)
		return err
	}},
	{name: "decr", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error { _, err := db.Decr(ctx, "n"); return err }},
	{name: "decrby", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		_, err := db.DecrBy(ctx, "n", 2)
		return err
	}},
	{name: "cas", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		_, err := db.CAS(ctx, "n", 5, 6)
		return err
	}},
	{name: "cas-absent", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		_, err := db.CAS(ctx, "nx", nil, 1)
		return err
	}},
	{name: "expire", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		_, err := db.Expire(ctx, "k", time.Minute)
		return err
	}},
	{name: "expire-deletes", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		_, err := db.Expire(ctx, "doomed", 0)
		return err
	}},
	{name: "lease", lease: true, call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		_, err := db.Lease(ctx, "other", "b", time.Minute)
		return err
	}},
	{name: "renew", call: func(ctx context.Context, db *state.DB, l *state.Lease) error { return db.Renew(ctx, l, 2*time.Hour) }},
	{name: "update-set", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		return db.Update(ctx, func(tx *state.Tx) error { return tx.Set("k", 3) })
	}},
	{name: "update-incr", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		return db.Update(ctx, func(tx *state.Tx) error { _, err := tx.Incr("n"); return err })
	}},
	{name: "update-renew", call: func(ctx context.Context, db *state.DB, l *state.Lease) error {
		return db.Update(ctx, func(tx *state.Tx) error { return tx.Renew(l, 3*time.Hour) })
	}},
	{name: "release", call: func(ctx context.Context, db *state.DB, l *state.Lease) error { return db.Release(ctx, l) }},
	{name: "flush", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		if err := db.IncrBuffered("n", 10); err != nil {
			return err
		}
		return db.Flush(ctx)
	}},
}

// syncReads is every verb that only reads, and an Update that only reads
// or whose callback wrote and then failed (so nothing is sent).
var syncReads = []syncWrite{
	{name: "get", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error { _, err := db.Get(ctx, "k"); return err }},
	{name: "ttl", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error { _, err := db.TTL(ctx, "k"); return err }},
	{name: "scan", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		return db.Scan(ctx, "", false, func(state.KeyInfo) error { return nil })
	}},
	{name: "leases", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		return db.Leases(ctx, true, func(state.LeaseInfo) error { return nil })
	}},
	{name: "stats", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error { _, err := db.Stats(ctx); return err }},
	{name: "check", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error { _, err := db.Check(ctx); return err }},
	{name: "sweep", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error { _, err := db.Sweep(ctx); return err }},
	{name: "update-reads", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		return db.Update(ctx, func(tx *state.Tx) error { _, err := tx.Get("k"); return err })
	}},
	{name: "update-writes-then-fails", call: func(ctx context.Context, db *state.DB, _ *state.Lease) error {
		errCallback := errors.New("callback")
		err := db.Update(ctx, func(tx *state.Tx) error {
			if err := tx.Set("k", 9); err != nil {
				return err
			}
			return errCallback
		})
		if errors.Is(err, errCallback) {
			return nil
		}
		return fmt.Errorf("want the callback's error, got %w", err)
	}},
}

// seedSync writes the keys and the lease the verbs of syncWrites use, and
// returns the lease.
func seedSync(t *testing.T, ctx context.Context, db *state.DB) *state.Lease {
	t.Helper()
	require.NoError(t, db.Set(ctx, "k", 1, state.TTL(time.Hour)))
	require.NoError(t, db.Set(ctx, "n", 5))
	require.NoError(t, db.Set(ctx, "gone", "x"))
	require.NoError(t, db.Set(ctx, "doomed", "x"))
	l, err := db.Lease(ctx, "job", "a", time.Hour)
	require.NoError(t, err)
	return l
}

// snapshot is every key, value and deadline and every lease of db, as text.
func snapshot(t *testing.T, ctx context.Context, db *state.DB) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, db.Scan(ctx, "", false, func(ki state.KeyInfo) error {
		fmt.Fprintf(&b, "key %s=%v until %d\n", ki.Key, ki.Value, ki.Expires.UnixMilli())
		return nil
	}))
	require.NoError(t, db.Leases(ctx, true, func(li state.LeaseInfo) error {
		fmt.Fprintf(&b, "lease %s %s %d until %d\n", li.Name, li.Owner, li.Token, li.Expires.UnixMilli())
		return nil
	}))
	return b.String()
}

// openSyncFull opens url with state.WithSync(state.SyncFull), without a
// background flush (a test's Flush is the only one), and closes it when
// the test ends.
func openSyncFull(t *testing.T, url string) *state.DB {
	t.Helper()
	db, err := state.Open(url, state.WithSync(state.SyncFull), state.WithFlushInterval(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestSyncFullRefusesWritesOnAServerThatMayLoseThem: WithSync(SyncFull)
// promises every answered write survives a crash. Over a Redis URL, a
// server with appendfsync everysec may lose the last second of them, so
// every write verb of a SyncFull store (Set, Del, the Incr/Decr family,
// CAS, Expire, Lease, Renew, Release, an Update whose callback wrote, a
// Flush of buffered increments) fails with ErrNotDurable, saying why and
// how to opt out, and writes nothing; the reads, and an Update that sends
// nothing, work. allow_unsafe_leases=true does not lift the check. Without
// SyncFull the same server takes every write but a lease grant, as
// before; with appendfsync always every verb of the SyncFull store works,
// and the increments the refused Flush kept are written.
func TestSyncFullRefusesWritesOnAServerThatMayLoseThem(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxT(t)
	plain := openURL(t, srv.URL("t:"))
	l := seedSync(t, ctx, plain)

	redisCmd(t, srv, "CONFIG", "SET", "appendfsync", "everysec")
	sf := openSyncFull(t, srv.URL("t:"))
	before := snapshot(t, ctx, plain)
	for _, w := range syncWrites {
		lc := *l
		err := w.call(ctx, sf, &lc)
		require.ErrorIs(t, err, state.ErrNotDurable, "%s on appendfsync everysec", w.name)
		assert.Contains(t, err.Error(), "appendfsync everysec", w.name)
		assert.Contains(t, err.Error(), "state.WithSync(state.SyncFull)", w.name)
		assert.NotErrorIs(t, err, state.ErrOutcomeUnknown, "%s: refused before it was sent", w.name)
		require.Equal(t, before, snapshot(t, ctx, plain), "%s wrote nothing", w.name)
	}
	for _, r := range syncReads {
		lc := *l
		require.NoError(t, r.call(ctx, sf, &lc), "%s reads on appendfsync everysec", r.name)
	}
	require.Equal(t, before, snapshot(t, ctx, plain))

	unsafe := openSyncFull(t, srv.URL("t:")+"&allow_unsafe_leases=true")
	err := unsafe.Set(ctx, "k", 2)
	require.ErrorIs(t, err, state.ErrNotDurable, "allow_unsafe_leases names leases: SyncFull's check stands")
	_, err = unsafe.Lease(ctx, "other", "b", time.Minute)
	require.ErrorIs(t, err, state.ErrNotDurable, "with SyncFull a grant is a write like any other")
	require.Equal(t, before, snapshot(t, ctx, plain))

	// Without SyncFull nothing changes: every write but a grant goes through.
	for _, w := range syncWrites {
		lc := *l
		err := w.call(ctx, plain, &lc)
		if w.lease {
			require.ErrorIs(t, err, state.ErrNotDurable, w.name)
			continue
		}
		require.NoError(t, err, "%s without SyncFull on appendfsync everysec", w.name)
	}

	redisCmd(t, srv, "CONFIG", "SET", "appendfsync", "always")
	l, err = plain.Lease(ctx, "job", "a", time.Hour)
	require.NoError(t, err)
	require.NoError(t, plain.Set(ctx, "n", 5))
	require.NoError(t, plain.Set(ctx, "doomed", "x"))
	require.NoError(t, plain.Set(ctx, "gone", "x"))
	_, err = plain.Del(ctx, "nx")
	require.NoError(t, err)
	for _, w := range syncWrites {
		lc := *l
		require.NoError(t, w.call(ctx, sf, &lc), "%s with SyncFull on appendfsync always", w.name)
	}
	// n: 5, +1 +3 -1 -2 (the CAS from 5 finds 6 and swaps nothing), +1
	// in Update, +10 from this Flush and +10 kept from the refused one.
	n, err := plain.Get(ctx, "n")
	require.NoError(t, err)
	got, _ := n.Int()
	assert.EqualValues(t, 5+1+3-1-2+1+10+10, got, "the refused flush kept its increment for the next")
}

// TestSyncFullRechecksDurabilityAfterRestart: SyncFull's check passes once
// and is remembered until the store opens a connection. A server restarted
// with appendfsync everysec is reached over new connections only: the
// first write that reaches it is checked again after its script ran, and
// fails with ErrOutcomeUnknown and ErrNotDurable (it was applied, on a
// server that may lose it); the next is refused before it is sent.
func TestSyncFullRechecksDurabilityAfterRestart(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxT(t)
	sf := openSyncFull(t, srv.URL("t:"))
	require.NoError(t, sf.Set(ctx, "k", 0), "the check passes, and is remembered")

	srv.RestartWith(redistest.WithArgs("--appendfsync", "everysec"))
	var err error
	tries := 0
	eventually(t, "an answer from the restarted server", func() bool {
		tries++
		err = sf.Set(ctx, "k", tries)
		return ctx.Err() != nil || !errors.Is(err, state.ErrUnavailable) &&
			(!errors.Is(err, state.ErrOutcomeUnknown) || errors.Is(err, state.ErrNotDurable))
	})
	require.ErrorIs(t, err, state.ErrNotDurable)
	require.ErrorIs(t, err, state.ErrOutcomeUnknown, "the write ran before the check that refused the server")
	assert.Contains(t, err.Error(), "appendfsync everysec")
	v, gerr := sf.Get(ctx, "k")
	require.NoError(t, gerr)
	got, _ := v.Int()
	require.EqualValues(t, tries, got, "the write whose outcome was not given was applied")

	err = sf.Set(ctx, "k", -1)
	require.ErrorIs(t, err, state.ErrNotDurable)
	assert.NotErrorIs(t, err, state.ErrOutcomeUnknown, "refused before it was sent")
	v, gerr = sf.Get(ctx, "k")
	require.NoError(t, gerr)
	got, _ = v.Int()
	assert.EqualValues(t, tries, got, "the refused write was not applied")
}

// TestSyncFullRefusesAServerThatEvicts: a server that may evict keys to
// make room can lose an acknowledged write as surely as one that does not
// fsync: a SyncFull store refuses to write there, and says so.
func TestSyncFullRefusesAServerThatEvicts(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru"))
	ctx := ctxT(t)
	sf := openSyncFull(t, srv.URL("t:"))
	err := sf.Set(ctx, "k", 1)
	require.ErrorIs(t, err, state.ErrNotDurable)
	assert.Contains(t, err.Error(), "maxmemory-policy allkeys-lru")
	assert.Contains(t, err.Error(), "state.WithSync(state.SyncFull)")
	_, err = sf.Get(ctx, "k")
	require.ErrorIs(t, err, state.ErrNotFound, "nothing was written")

	redisCmd(t, srv, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	require.NoError(t, sf.Set(ctx, "k", 1), "checked again after a refusal")
}

// TestSyncFullRefusesAppendonlyNo: a server that keeps no append-only
// file, whatever its appendfsync says, may lose any write: a SyncFull
// write is refused with ErrNotDurable naming why, and writes nothing.
func TestSyncFullRefusesAppendonlyNo(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--appendonly", "no", "--appendfsync", "always"))
	sf := openSyncFull(t, srv.URL("t:"))
	err := sf.Set(ctxT(t), "k", 1)
	require.ErrorIs(t, err, state.ErrNotDurable)
	assert.Contains(t, err.Error(), "appendonly no")
	_, err = sf.Get(ctxT(t), "k")
	require.ErrorIs(t, err, state.ErrNotFound, "nothing written")
}
