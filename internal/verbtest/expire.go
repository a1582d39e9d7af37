package verbtest

import (
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// expireCases: Expire and TTL on live and absent keys, without waiting
// for a deadline.
var expireCases = []verbCase{
	{"expire/live-and-absent", func(t *testing.T, e *env) {
		ok, err := e.db.Expire(e.ctx, "missing", time.Second)
		require.NoError(t, err)
		assert.False(t, ok, "absent key")
		assert.Equal(t, "<absent>", e.get("missing"), "Expire creates nothing")

		e.set("k", "v")
		ok, err = e.db.Expire(e.ctx, "k", time.Hour)
		require.NoError(t, err)
		assert.True(t, ok, "a live key without a deadline gets one")
		e.ttlWithin("k", time.Hour, "Expire's deadline")
		assert.Equal(t, "bytes:v", e.get("k"), "the value is kept")

		ok, err = e.db.Expire(e.ctx, "k", 2*time.Hour)
		require.NoError(t, err)
		assert.True(t, ok, "a deadline can move later")
		e.ttlWithin("k", 2*time.Hour, "moved later")
		ok, err = e.db.Expire(e.ctx, "k", time.Minute)
		require.NoError(t, err)
		assert.True(t, ok, "and earlier")
		e.ttlWithin("k", time.Minute, "moved earlier")

		e.set("i", 5)
		ok, err = e.db.Expire(e.ctx, "i", time.Hour)
		require.NoError(t, err)
		assert.True(t, ok)
		n, err := e.db.Incr(e.ctx, "i")
		require.NoError(t, err)
		assert.Equal(t, int64(6), n, "an integer keeps its type under a deadline")
		e.ttlWithin("i", time.Hour, "Incr keeps the deadline Expire gave")
	}},

	{"expire/non-positive-deletes", func(t *testing.T, e *env) {
		for _, ttl := range []time.Duration{0, -time.Second, -time.Nanosecond} {
			e.set("k", "v", state.TTL(time.Hour))
			ok, err := e.db.Expire(e.ctx, "k", ttl)
			require.NoError(t, err, "ttl %v", ttl)
			assert.True(t, ok, "ttl %v on a live key: it was live", ttl)
			assert.Equal(t, "<absent>", e.get("k"), "ttl %v deletes", ttl)
			ok, err = e.db.Expire(e.ctx, "k", ttl)
			require.NoError(t, err)
			assert.False(t, ok, "ttl %v: nothing left to delete", ttl)
		}
		e.set("plain", 1)
		ok, err := e.db.Expire(e.ctx, "plain", 0)
		require.NoError(t, err)
		assert.True(t, ok, "a key without a deadline is deleted too")
		assert.Equal(t, "<absent>", e.get("plain"))
	}},

	{"ttl/answers", func(t *testing.T, e *env) {
		_, err := e.db.TTL(e.ctx, "missing")
		assert.ErrorIs(t, err, state.ErrNotFound)
		assert.ErrorContains(t, err, `ttl "missing"`)
		e.set("k", 1)
		e.noExpiry("k", "a live key without a deadline")
		e.set("b", "x")
		e.noExpiry("b", "bytes too")
		e.set("d", 1, state.TTL(90*time.Second))
		left := e.ttl("d")
		assert.Greater(t, left, time.Duration(0))
		assert.LessOrEqual(t, left, 90*time.Second)
		assert.NotEqual(t, state.NoExpiry, left)
		assert.Equal(t, left.Truncate(time.Millisecond), left, "whole milliseconds")
	}},
}

// expiryCases wait for short real deadlines to pass.
var expiryCases = []verbCase{
	{"expiry/set-ttl-then-absent-to-every-verb", func(t *testing.T, e *env) {
		since := time.Now()
		e.set("k", "v", state.TTL(short))
		e.set("i", 5, state.TTL(short))
		e.set("keep", "v")
		e.waitAbsent("k", since, short)
		e.waitAbsent("i", since, short)

		_, err := e.db.TTL(e.ctx, "k")
		assert.ErrorIs(t, err, state.ErrNotFound, "TTL of an expired key")
		ok, err := e.db.Expire(e.ctx, "k", time.Hour)
		require.NoError(t, err)
		assert.False(t, ok, "an expired key is absent to Expire")
		ok, err = e.db.CAS(e.ctx, "k", "v", "w")
		require.NoError(t, err)
		assert.False(t, ok, "an expired value never matches")
		n, err := e.db.Del(e.ctx, "k", "keep", "missing")
		require.NoError(t, err)
		assert.Equal(t, 1, n, "an expired key does not count as deleted")

		ok, err = e.db.CAS(e.ctx, "k", nil, "new")
		require.NoError(t, err)
		assert.True(t, ok, "an expired key matches nil")
		assert.Equal(t, "bytes:new", e.get("k"))
		e.noExpiry("k", "a key created by CAS has no deadline")

		c, err := e.db.Incr(e.ctx, "i")
		require.NoError(t, err)
		assert.Equal(t, int64(1), c, "an expired counter starts over")
		e.noExpiry("i", "the old deadline is gone with the old value")
	}},

	{"expiry/absent-once-the-store-time-passes-the-deadline", func(t *testing.T, e *env) {
		// No poll of the verbs here: once the store's own time (db.Now)
		// is past a deadline, the key is absent to every verb at once,
		// swept or not.
		before := e.db.Now()
		e.set("k", "v", state.TTL(short))
		e.set("i", 7, state.TTL(short))
		_, err := e.db.Incr(e.ctx, "n", state.TTL(short))
		require.NoError(t, err)
		ok, err := e.db.CAS(e.ctx, "c", nil, "x", state.TTL(short))
		require.NoError(t, err)
		require.True(t, ok)
		e.set("e", "y")
		ok, err = e.db.Expire(e.ctx, "e", short)
		require.NoError(t, err)
		require.True(t, ok)
		e.set("live", "z")
		after := e.db.Now()
		require.False(t, after.Before(before), "the store's time went back")
		e.waitPast(after.Add(short))

		keys := []string{"k", "i", "n", "c", "e"}
		for _, k := range keys {
			_, err := e.db.Get(e.ctx, k)
			assert.ErrorIs(t, err, state.ErrNotFound, "Get %q past its deadline", k)
			_, err = e.db.TTL(e.ctx, k)
			assert.ErrorIs(t, err, state.ErrNotFound, "TTL %q past its deadline", k)
		}
		assert.Equal(t, []string{"live"}, e.scanKeys("", false), "Scan past the deadlines")
		s, err := e.db.Stats(e.ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), s.Keys, "Stats.Keys past the deadlines")
		assert.Zero(t, s.KeysWithDeadline, "Stats.KeysWithDeadline past the deadlines")
		n, err := e.db.Del(e.ctx, append(keys, "live")...)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "Del counts only the live key")
	}},

	{"expiry/expired-bytes-is-absent-to-incr", func(t *testing.T, e *env) {
		since := time.Now()
		e.set("s", "text", state.TTL(short))
		e.waitAbsent("s", since, short)
		n, err := e.db.Incr(e.ctx, "s", state.TTL(time.Hour))
		require.NoError(t, err, "an expired bytes value is absent, not a type error")
		assert.Equal(t, int64(1), n)
		e.ttlWithin("s", time.Hour, "the new key gets the TTL")
	}},

	{"expiry/incr-created-counter", func(t *testing.T, e *env) {
		since := time.Now()
		n, err := e.db.Incr(e.ctx, "rate", state.TTL(short))
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
		e.waitAbsent("rate", since, short)
		n, err = e.db.Incr(e.ctx, "rate", state.TTL(time.Minute))
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "expired counter starts over")
		e.ttlWithin("rate", time.Minute, "and gets the new TTL")
	}},

	{"expiry/expire-gives-a-short-deadline", func(t *testing.T, e *env) {
		e.set("k", "v")
		since := time.Now()
		ok, err := e.db.Expire(e.ctx, "k", short)
		require.NoError(t, err)
		require.True(t, ok)
		e.waitAbsent("k", since, short)
		ok, err = e.db.Expire(e.ctx, "k", time.Hour)
		require.NoError(t, err)
		assert.False(t, ok)
	}},

	{"expiry/cas-created-with-ttl", func(t *testing.T, e *env) {
		since := time.Now()
		ok, err := e.db.CAS(e.ctx, "k", nil, "first", state.TTL(short))
		require.NoError(t, err)
		require.True(t, ok)
		e.waitAbsent("k", since, short)
		ok, err = e.db.CAS(e.ctx, "k", nil, "back", state.TTL(time.Minute))
		require.NoError(t, err)
		assert.True(t, ok, "an expired key counts as absent")
		assert.Equal(t, "bytes:back", e.get("k"))
		e.ttlWithin("k", time.Minute, "with the new TTL")
	}},

	{"expiry/cas-swap-keeps-short-deadline", func(t *testing.T, e *env) {
		since := time.Now()
		e.set("k", "a", state.TTL(short))
		ok, err := e.db.CAS(e.ctx, "k", "a", "b")
		require.NoError(t, err)
		if ok {
			// The swap kept the deadline: the new value goes at it.
			e.waitAbsent("k", since, short)
		} else {
			assert.Equal(t, "<absent>", e.get("k"), "CAS failed only because the key had expired")
		}
	}},

	{"expiry/scan-and-stats-skip-expired", func(t *testing.T, e *env) {
		since := time.Now()
		e.set("a:gone", "x", state.TTL(short))
		e.set("a:live", "y", state.TTL(time.Hour))
		e.set("a:plain", "z")
		e.waitAbsent("a:gone", since, short)
		assert.Equal(t, []string{"a:live", "a:plain"}, e.scanKeys("a:", false), "Scan without includeExpired reports live keys only")
		for _, k := range e.scan("a:", true) {
			if k.Key == "a:gone" {
				assert.True(t, k.Expired, "an expired key Scan reports is marked Expired")
				assert.LessOrEqual(t, k.Left, time.Duration(0))
			} else {
				assert.False(t, k.Expired, k.Key)
			}
		}
		s, err := e.db.Stats(e.ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(2), s.Keys, "Stats.Keys counts live keys")
		assert.Equal(t, int64(1), s.KeysWithDeadline, "Stats.KeysWithDeadline counts live keys with a deadline")
	}},

	{"expiry/scan-includes-unswept", func(t *testing.T, e *env) {
		// The file engine's background sweeper may delete the row between
		// the poll and the Scan: a few attempts, one of which must see it.
		const attempts = 5
		seen := 0
		for range attempts {
			_, err := e.db.Del(e.ctx, "k")
			require.NoError(t, err)
			since := time.Now()
			e.set("k", "v", state.TTL(short))
			e.waitAbsent("k", since, short)
			for _, k := range e.scan("", true) {
				require.Equal(t, "k", k.Key)
				seen++
				assert.True(t, k.Expired, "marked Expired")
				assert.LessOrEqual(t, k.Left, time.Duration(0), "Left")
				assert.False(t, k.Expires.IsZero(), "Expires is the deadline")
				assert.False(t, k.Expires.After(e.db.Now()), "Expires has passed")
				assert.Equal(t, "bytes:v", show(k.Value))
			}
			assert.Empty(t, e.scanKeys("", false), "never without includeExpired")
			if seen > 0 {
				break
			}
		}
		if e.opts.ScanSeesExpired {
			assert.Positive(t, seen, "Scan(includeExpired) never reported the expired, unswept key in %d attempts", attempts)
		}
	}},

	{"expiry/sweep", func(t *testing.T, e *env) {
		n, err := e.db.Sweep(e.ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n, "nothing to sweep on an empty store")
		e.set("live", 1, state.TTL(time.Hour))
		e.set("plain", 2)

		// The file engine's background sweeper may take some rows first:
		// a few attempts, one of which must count them all.
		const attempts, keys = 5, 3
		exact := false
		for range attempts {
			since := time.Now()
			for _, k := range []string{"e1", "e2", "e3"} {
				e.set(k, "x", state.TTL(short))
			}
			for _, k := range []string{"e1", "e2", "e3"} {
				e.waitAbsent(k, since, short)
			}
			n, err := e.db.Sweep(e.ctx)
			require.NoError(t, err)
			if !e.opts.SweepReportsRows {
				assert.Equal(t, 0, n, "a store that expires keys itself sweeps nothing")
				exact = true
			} else {
				assert.GreaterOrEqual(t, n, 0)
				assert.LessOrEqual(t, n, keys, "Sweep deletes only expired keys")
				exact = exact || n == keys
			}
			assert.Equal(t, []string{"live", "plain"}, e.scanKeys("", true), "after Sweep no expired key is left, and live ones are kept")
			if exact {
				break
			}
		}
		assert.True(t, exact, "Sweep never counted the %d keys it deleted in %d attempts", keys, attempts)
		n, err = e.db.Sweep(e.ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n, "a second Sweep finds nothing")
		e.ttlWithin("live", time.Hour, "Sweep keeps live deadlines")
	}},
}
