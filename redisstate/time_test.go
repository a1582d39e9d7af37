package redisstate_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notes collects the server times a verb reports through hooks.NoteNow.
type notes struct {
	mu sync.Mutex
	ms []int64
}

func (n *notes) ctx(ctx context.Context) context.Context {
	return hooks.WithNow(ctx, func(ms int64) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.ms = append(n.ms, ms)
	})
}

// one returns the single time noted, failing the test unless exactly one
// was, and forgets it.
func (n *notes) one(t *testing.T, what string) int64 {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	got := n.ms
	n.ms = nil
	require.Len(t, got, 1, "%s noted its server time once", what)
	return got[0]
}

// rawClient is a plain go-redis client on srv, for the server's TIME and
// PEXPIRETIME, outside the store.
func rawClient(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: srv.Password()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// serverMs returns the server's TIME in ms.
func serverMs(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	require.NoError(t, err)
	return tm.UnixMilli()
}

// deadlineOf returns the Redis key's deadline (PEXPIRETIME), ms.
func deadlineOf(t *testing.T, c *redis.Client, rkey string) int64 {
	t.Helper()
	at, err := c.Do(context.Background(), "PEXPIRETIME", rkey).Int64()
	require.NoError(t, err)
	require.Positive(t, at, "%s has a deadline", rkey)
	return at
}

// waitPast waits until the server's TIME is after ms.
func waitPast(t *testing.T, c *redis.Client, ms int64) {
	t.Helper()
	eventually(t, "the server's time passes "+strconv.FormatInt(ms, 10), func() bool { return serverMs(t, c) > ms })
}

// TestVerbsNoteTheirServerTime: every verb tells its context's observer
// (hooks.NoteNow) the server time its script used, once, between a TIME
// read before the call and one after it.
func TestVerbsNoteTheirServerTime(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))
	check := func(what string, call func() error) {
		t.Helper()
		before := serverMs(t, rc)
		require.NoError(t, call(), what)
		after := serverMs(t, rc)
		at := n.one(t, what)
		assert.GreaterOrEqual(t, at, before, what)
		assert.LessOrEqual(t, at, after, what)
	}
	check("set", func() error { return db.Set(ctx, "k", 1, state.TTL(time.Hour)) })
	check("get", func() error { _, err := db.Get(ctx, "k"); return err })
	check("get of an absent key", func() error {
		_, err := db.Get(ctx, "absent")
		if errors.Is(err, state.ErrNotFound) {
			return nil
		}
		return err
	})
	check("incrby", func() error { _, err := db.IncrBy(ctx, "k", 2); return err })
	check("cas", func() error { _, err := db.CAS(ctx, "k", 3, 4); return err })
	check("expire", func() error { _, err := db.Expire(ctx, "k", time.Hour); return err })
	check("ttl", func() error { _, err := db.TTL(ctx, "k"); return err })
	check("del", func() error { _, err := db.Del(ctx, "k", "other"); return err })
	var l *state.Lease
	check("lease", func() error { var err error; l, err = db.Lease(ctx, "L", "me", time.Hour); return err })
	check("renew", func() error { return db.Renew(ctx, l, time.Hour) })
	check("release", func() error { return db.Release(ctx, l) })
	check("update", func() error {
		return db.Update(ctx, func(tx *state.Tx) error {
			_, err := tx.Incr("u")
			return err
		})
	})
	check("update that only writes blind", func() error {
		return db.Update(ctx, func(tx *state.Tx) error { return tx.Set("blind", 1) })
	})
	require.NoError(t, db.IncrBuffered("buf", 5))
	check("flush", func() error { return db.Flush(ctx) })
	v, err := db.Get(context.Background(), "buf")
	require.NoError(t, err)
	assert.Equal(t, "5", v.String())

	// An Update whose callback fails notes the time its answers hold at.
	oops := errors.New("oops")
	before := serverMs(t, rc)
	err = db.Update(ctx, func(tx *state.Tx) error {
		_, err := tx.Get("u")
		require.NoError(t, err)
		return oops
	})
	require.ErrorIs(t, err, oops)
	at := n.one(t, "an aborted update")
	assert.GreaterOrEqual(t, at, before)

	// So does one that only wrote blind before it failed: its time is
	// read at its first verb.
	before = serverMs(t, rc)
	err = db.Update(ctx, func(tx *state.Tx) error {
		require.NoError(t, tx.Set("blind", 2, state.TTL(time.Minute)))
		return oops
	})
	require.ErrorIs(t, err, oops)
	at = n.one(t, "an aborted update that wrote blind")
	assert.GreaterOrEqual(t, at, before)
	assert.LessOrEqual(t, at, serverMs(t, rc))
}

// TestTTLCountsFromTheScriptsTime: TTL is the deadline less the server
// time the script reports, exactly, every time (Redis's PTTL counts from a
// later clock reading, a millisecond short now and then); so is a held
// lease's Left.
func TestTTLCountsFromTheScriptsTime(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))
	require.NoError(t, db.Set(ctx, "k", "v", state.TTL(time.Hour)))
	n.one(t, "set")
	dl := deadlineOf(t, rc, "t:k:k")
	held, err := db.Lease(ctx, "L", "holder", time.Hour)
	require.NoError(t, err)
	n.one(t, "lease")
	for i := range 300 {
		left, err := db.TTL(ctx, "k")
		require.NoError(t, err)
		now := n.one(t, "ttl")
		require.Equal(t, time.Duration(dl-now)*time.Millisecond, left, "ttl #%d at %d", i, now)

		_, err = db.Lease(ctx, "L", "other", time.Minute)
		var he *state.LeaseHeldError
		require.ErrorAs(t, err, &he)
		now = n.one(t, "held lease")
		require.Equal(t, held.Expires, he.Expires)
		require.Equal(t, time.Duration(held.Expires.UnixMilli()-now)*time.Millisecond, he.Left, "left #%d at %d", i, now)
	}
}

// TestLivenessAtTheScriptsTime: a key is live while its deadline is after
// the time the verb reports, as on a file, on every read around its
// deadline: Get, TTL, and a read inside Update.
func TestLivenessAtTheScriptsTime(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))
	// A round whose first read came after the deadline (a loaded machine:
	// the key may be gone before its deadline can be read back) saw no
	// live read: it is run again with twice the ttl, up to 64 times it.
	for round, scale := 0, int64(1); round < 3; {
		ttl := scale * 30
		require.NoError(t, db.Set(ctx, "k", "v", state.TTL(time.Duration(ttl)*time.Millisecond)))
		dl := n.one(t, "set") + ttl
		if at, err := rc.Do(ctx, "PEXPIRETIME", "t:k:k").Int64(); err == nil && at != -2 {
			require.Equal(t, dl, at, "the deadline is the set's time plus the ttl")
		}
		reads := 0
		for gone := false; !gone; reads++ {
			require.Less(t, reads, 1_000_000, "the key never expired")
			var err error
			switch reads % 3 {
			case 0:
				_, err = db.Get(ctx, "k")
			case 1:
				var left time.Duration
				left, err = db.TTL(ctx, "k")
				if err == nil {
					assert.Positive(t, left)
				}
			case 2:
				err = db.Update(ctx, func(tx *state.Tx) error {
					_, err := tx.Get("k")
					return err
				})
			}
			if err != nil {
				require.ErrorIs(t, err, state.ErrNotFound)
				gone = true
			}
			now := n.one(t, "read")
			require.Equal(t, now < dl, !gone, "round %d read %d (%d) at %d, deadline %d", round, reads, reads%3, now, dl)
		}
		if reads == 1 { // gone at the first read
			require.Less(t, scale, int64(64), "no read came before a deadline %d ms after the set", ttl)
			t.Logf("round %d: the first read came after the deadline: again with a %d ms ttl", round, 2*ttl)
			scale *= 2
			continue
		}
		round++
	}
}

// TestUpdateReadsAKeyThatExpiredAfterItsNow: a transaction's now is the
// time of its first read; a key that expired after it reads as absent
// later in the callback, and the transaction's now moves forward to that
// read, so every answer and the time noted agree.
func TestUpdateReadsAKeyThatExpiredAfterItsNow(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))
	require.NoError(t, db.Set(ctx, "anchor", "a"))
	n.ms = nil
	require.NoError(t, db.Set(ctx, "short", "s", state.TTL(300*time.Millisecond)))
	dl := n.one(t, "set") + 300 // read back, the key may be gone on a loaded machine
	runs := 0
	err := db.Update(ctx, func(tx *state.Tx) error {
		runs++
		_, err := tx.Get("anchor")
		require.NoError(t, err)
		waitPast(t, rc, dl)
		_, err = tx.Get("short")
		require.ErrorIs(t, err, state.ErrNotFound, "expired by the time it is read")
		deleted, err := tx.Del("short")
		require.NoError(t, err)
		require.Zero(t, deleted)
		return tx.Set("made", "m", state.TTL(time.Hour))
	})
	require.NoError(t, err)
	assert.Equal(t, 1, runs, "nothing the callback answered held at the first now only: no retry")
	now := n.one(t, "update")
	assert.GreaterOrEqual(t, now, dl, "the short key was absent, so the transaction's time is at or past its deadline")
	assert.Equal(t, now+time.Hour.Milliseconds(), deadlineOf(t, rc, "t:k:made"),
		"a deadline the transaction writes is counted from its final now")
}

// TestUpdateStartsOverWhenItsNowCannotMove: a TTL answer (or a key read
// live until before the later read) holds only at the transaction's first
// now; a key found expired after it then makes the attempt start over, at
// a later now where every answer holds.
func TestUpdateStartsOverWhenItsNowCannotMove(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))

	// Each case needs the first attempt's first read before the short
	// deadline: a run whose first read came later (a loaded machine) is
	// run again on new keys with twice the ttls, up to 32 times them.
	scaled := func(t *testing.T, run func(scale time.Duration) bool) {
		for scale := time.Duration(1); !run(scale); scale *= 2 {
			require.Less(t, scale, time.Duration(32), "the first read never came before the short deadline")
			t.Logf("the first read came after the short deadline: again with %dx the ttls", scale*2)
		}
	}

	t.Run("ttl", func(t *testing.T) {
		scaled(t, func(scale time.Duration) bool {
			lk, sk := fmt.Sprint("long", scale), fmt.Sprint("short", scale)
			require.NoError(t, db.Set(ctx, lk, "l", state.TTL(time.Hour)))
			n.ms = nil
			require.NoError(t, db.Set(ctx, sk, "s", state.TTL(scale*300*time.Millisecond)))
			short := n.one(t, "set") + int64(scale)*300 // read back, the key may be gone
			long := deadlineOf(t, rc, "t:k:"+lk)
			runs := 0
			var left, firstLeft time.Duration
			err := db.Update(ctx, func(tx *state.Tx) error {
				runs++
				var err error
				left, err = tx.TTL(lk)
				require.NoError(t, err)
				if runs == 1 {
					firstLeft = left
					waitPast(t, rc, short)
				}
				_, err = tx.Get(sk)
				if errors.Is(err, state.ErrNotFound) {
					err = nil
				}
				return err
			})
			require.NoError(t, err)
			now := n.one(t, "update")
			if long-firstLeft.Milliseconds() >= short {
				return false // the first attempt's now was past the short deadline
			}
			assert.GreaterOrEqual(t, runs, 2, "the first attempt's TTL held only at its first now")
			assert.GreaterOrEqual(t, now, short)
			assert.Equal(t, time.Duration(long-now)*time.Millisecond, left, "the last attempt's TTL at the time noted")
			return true
		})
	})

	t.Run("live key", func(t *testing.T) {
		scaled(t, func(scale time.Duration) bool {
			ak, bk := fmt.Sprint("a", scale), fmt.Sprint("b", scale)
			n.ms = nil
			require.NoError(t, db.Set(ctx, ak, "a", state.TTL(scale*400*time.Millisecond)))
			da := n.one(t, "set") + int64(scale)*400 // read back, the key may be gone
			require.NoError(t, db.Set(ctx, bk, "b", state.TTL(scale*200*time.Millisecond)))
			n.ms = nil
			runs := 0
			late := false
			var aErr, bErr error
			err := db.Update(ctx, func(tx *state.Tx) error {
				runs++
				_, aErr = tx.Get(ak)
				if runs == 1 {
					if errors.Is(aErr, state.ErrNotFound) {
						late = true // a expired before the first attempt's now
						return nil
					}
					require.NoError(t, aErr, "a is live at the first attempt's now")
					waitPast(t, rc, da)
				}
				_, bErr = tx.Get(bk)
				return nil
			})
			require.NoError(t, err)
			now := n.one(t, "update")
			if late {
				return false
			}
			assert.GreaterOrEqual(t, runs, 2, "a was read live until a time before b was read absent")
			assert.GreaterOrEqual(t, now, da)
			assert.ErrorIs(t, aErr, state.ErrNotFound)
			assert.ErrorIs(t, bErr, state.ErrNotFound)
			return true
		})
	})
}

// TestUpdateTTLIsCountedFromItsNow: a TTL inside Update is the deadline
// less the time noted, for a key read from the server and for one the
// transaction wrote (its ttl, exactly); deadlines written are now + ttl.
func TestUpdateTTLIsCountedFromItsNow(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))
	require.NoError(t, db.Set(ctx, "k", "v", state.TTL(time.Hour)))
	require.NoError(t, db.Set(ctx, "e", "v"))
	n.ms = nil
	dl := deadlineOf(t, rc, "t:k:k")
	for i := range 50 {
		var left, made, incr time.Duration
		err := db.Update(ctx, func(tx *state.Tx) error {
			var err error
			if left, err = tx.TTL("k"); err != nil {
				return err
			}
			if err := tx.Set("new", i, state.TTL(time.Minute)); err != nil {
				return err
			}
			if made, err = tx.TTL("new"); err != nil {
				return err
			}
			if _, err := tx.Del("n"); err != nil {
				return err
			}
			if _, err := tx.IncrBy("n", 1, state.TTL(2*time.Minute)); err != nil {
				return err
			}
			if incr, err = tx.TTL("n"); err != nil {
				return err
			}
			_, err = tx.Expire("e", 3*time.Minute)
			return err
		})
		require.NoError(t, err)
		now := n.one(t, "update")
		require.Equal(t, time.Duration(dl-now)*time.Millisecond, left, "#%d at %d", i, now)
		require.Equal(t, time.Minute, made)
		require.Equal(t, 2*time.Minute, incr)
		require.Equal(t, now+time.Minute.Milliseconds(), deadlineOf(t, rc, "t:k:new"))
		require.Equal(t, now+(2*time.Minute).Milliseconds(), deadlineOf(t, rc, "t:k:n"))
		require.Equal(t, now+(3*time.Minute).Milliseconds(), deadlineOf(t, rc, "t:k:e"))
	}
}

// TestUpdateLeaseAtItsNow: a lease granted inside Update expires at the
// time noted plus its ttl, and a held one's Left counts from it.
func TestUpdateLeaseAtItsNow(t *testing.T) {
	db, srv := openDB(t)
	rc := rawClient(t, srv)
	var n notes
	ctx := n.ctx(ctxT(t))
	var l *state.Lease
	err := db.Update(ctx, func(tx *state.Tx) error {
		var err error
		l, err = tx.Lease("L", "me", time.Minute)
		return err
	})
	require.NoError(t, err)
	now := n.one(t, "update")
	assert.Equal(t, now+time.Minute.Milliseconds(), l.Expires.UnixMilli())
	stored, err := rc.HGet(context.Background(), "t:lease:L", "expires").Int64()
	require.NoError(t, err)
	assert.Equal(t, l.Expires.UnixMilli(), stored)

	var he *state.LeaseHeldError
	err = db.Update(ctx, func(tx *state.Tx) error {
		_, err := tx.Lease("L", "other", time.Minute)
		return err
	})
	require.ErrorAs(t, err, &he)
	now = n.one(t, "an update the held lease aborted")
	assert.Equal(t, time.Duration(l.Expires.UnixMilli()-now)*time.Millisecond, he.Left)
}
