package verbtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listCases: Scan, Leases, Stats, Check.
var listCases = []verbCase{
	{"scan/prefix-order-values-deadlines", func(t *testing.T, e *env) {
		e.set("b:2", 2, state.TTL(time.Hour))
		e.set("c", "last")
		e.set("b:1", "one")
		before := e.db.Now()
		e.set("b:3", []byte{0, 255}, state.TTL(time.Minute))
		after := e.db.Now()
		e.set("a", "first")
		e.set("b", "bare")

		got := e.scan("", false)
		var lines []string
		for _, k := range got {
			lines = append(lines, k.Key+"="+show(k.Value))
		}
		assert.Equal(t, []string{"a=bytes:first", "b=bytes:bare", "b:1=bytes:one", "b:2=int:2", "b:3=bytes:\x00\xff", "c=bytes:last"},
			lines, "every live key in byte order, with its typed value")
		assert.Equal(t, []string{"b:1", "b:2", "b:3"}, e.scanKeys("b:", false))
		assert.Equal(t, []string{"b", "b:1", "b:2", "b:3"}, e.scanKeys("b", false))
		assert.Equal(t, []string{"b:2"}, e.scanKeys("b:2", false), "a whole key is a prefix of itself")
		assert.Empty(t, e.scanKeys("zz", true))
		assert.Empty(t, e.scanKeys("b:0", true))

		for _, k := range got {
			assert.False(t, k.Expired, k.Key)
			switch k.Key {
			case "b:2":
				assert.Greater(t, k.Left, time.Hour-time.Minute, k.Key)
				assert.LessOrEqual(t, k.Left, time.Hour, k.Key)
				assert.False(t, k.Expires.IsZero(), k.Key)
			case "b:3":
				assert.Positive(t, k.Left, k.Key)
				assert.LessOrEqual(t, k.Left, time.Minute, k.Key)
				e.bracket(k.Expires, before, after, time.Minute, "Scan's Expires of b:3")
			default:
				assert.Equal(t, state.NoExpiry, k.Left, "%s: NoExpiry without a deadline", k.Key)
				assert.True(t, k.Expires.IsZero(), "%s: the zero Time without a deadline", k.Key)
			}
		}
	}},

	{"scan/prefix-is-bytes-not-a-pattern", func(t *testing.T, e *env) {
		// "¿" is C2 BF: the bound past it, C2 C0, is not valid UTF-8.
		// The others are glob and regexp characters taken literally.
		keys := []string{"a", "¿", "¿x", "À", "Á", "é", "éa", "ê",
			"p*", "p*q", "pq", "p?", "px", "p[a]", "pa", "p\\", "p\\x", "p%", "p_", "p.", "p^", "p{"}
		for _, k := range keys {
			e.set(k, 1)
		}
		cases := []struct {
			prefix string
			want   []string
		}{
			{"¿", []string{"¿", "¿x"}},
			{"é", []string{"é", "éa"}},
			{"p*", []string{"p*", "p*q"}},
			{"p?", []string{"p?"}},
			{"p[", []string{"p[a]"}},
			{"p[a]", []string{"p[a]"}},
			{"p\\", []string{"p\\", "p\\x"}},
			{"p%", []string{"p%"}},
			{"p_", []string{"p_"}},
			{"p.", []string{"p."}},
			{"p^", []string{"p^"}},
		}
		for _, c := range cases {
			assert.Equal(t, c.want, e.scanKeys(c.prefix, false), "prefix %q", c.prefix)
		}
		all := e.scanKeys("", false)
		assert.Len(t, all, len(keys))
		assert.IsIncreasing(t, all, "byte order")
	}},

	{"scan/pages-and-callback", func(t *testing.T, e *env) {
		const n = 700 // more than two of the file engine's pages
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error {
			for i := range n {
				if err := tx.Set(fmt.Sprintf("k%04d", i), i); err != nil {
					return err
				}
			}
			return nil
		}))
		e.set("other", 1)
		seen := 0
		err := e.db.Scan(e.ctx, "k", false, func(k state.KeyInfo) error {
			if k.Key != fmt.Sprintf("k%04d", seen) {
				return fmt.Errorf("key %d is %q: each key once, in order", seen, k.Key)
			}
			// The callback may use the store.
			v, err := e.db.Get(e.ctx, k.Key)
			if err != nil {
				return err
			}
			if !v.Equal(k.Value) || !v.Equal(state.IntValue(int64(seen))) {
				return fmt.Errorf("%q: scan says %s, get says %s", k.Key, show(k.Value), show(v))
			}
			seen++
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, n, seen)

		stop := errors.New("stop")
		calls := 0
		err = e.db.Scan(e.ctx, "", false, func(state.KeyInfo) error { calls++; return stop })
		assert.ErrorIs(t, err, stop, "the callback's error ends the scan")
		assert.Equal(t, stop, err, "and is returned as it is")
		assert.Equal(t, 1, calls)

		err = e.db.Scan(e.ctx, "", false, nil)
		assert.ErrorIs(t, err, state.ErrInvalidArgument)
		assert.ErrorContains(t, err, "scan")
	}},

	{"leases/list", func(t *testing.T, e *env) {
		held := e.lease("held", "a", time.Hour)
		rel := e.lease("released", "c", time.Minute)
		require.NoError(t, e.db.Release(e.ctx, rel))
		rel2 := e.lease("released", "d", time.Minute)
		require.NoError(t, e.db.Release(e.ctx, rel2))
		exp := e.lease("expired", "b", short)
		e.waitPast(exp.Expires)
		renewed := e.lease("b-renewed", "e", time.Minute)
		require.NoError(t, e.db.Renew(e.ctx, renewed, time.Hour))

		line := func(l state.LeaseInfo) string {
			return fmt.Sprintf("%s %s %d %v", l.Name, l.Owner, l.Token, l.Status)
		}
		var heldLines []string
		for _, l := range e.leases(false) {
			heldLines = append(heldLines, line(l))
			assert.Equal(t, state.LeaseHeld, l.Status)
			assert.Positive(t, l.Left, l.Name)
			assert.Greater(t, l.Left, time.Hour-time.Minute, l.Name)
			assert.LessOrEqual(t, l.Left, time.Hour, l.Name)
		}
		assert.Equal(t, []string{"b-renewed e 1 held", "held a 1 held"}, heldLines, "held leases in name order")

		var all []string
		for _, l := range e.leases(true) {
			all = append(all, line(l))
			switch l.Name {
			case "held":
				assert.Equal(t, held.Expires.UnixMilli(), l.Expires.UnixMilli(), "held: Expires")
			case "b-renewed":
				assert.Equal(t, renewed.Expires.UnixMilli(), l.Expires.UnixMilli(), "renewed: Expires")
			case "expired":
				assert.LessOrEqual(t, l.Left, time.Duration(0), "expired: Left")
				assert.Equal(t, exp.Expires.UnixMilli(), l.Expires.UnixMilli(), "expired: Expires is the passed deadline")
			case "released":
				assert.LessOrEqual(t, l.Left, time.Duration(0), "released: Left")
				assert.True(t, l.Expires.IsZero(), "released: Expires is the zero Time, got %v", l.Expires)
			}
		}
		assert.Equal(t, []string{"b-renewed e 1 held", "expired b 1 expired", "held a 1 held", "released d 2 released"}, all,
			"free leases keep their last owner and token")
		assert.Equal(t, "held", state.LeaseHeld.String())
		assert.Equal(t, "expired", state.LeaseExpired.String())
		assert.Equal(t, "released", state.LeaseReleased.String())

		stop := errors.New("stop")
		calls := 0
		err := e.db.Leases(e.ctx, true, func(state.LeaseInfo) error { calls++; return stop })
		assert.Equal(t, stop, err, "the callback's error ends the listing and is returned as it is")
		assert.Equal(t, 1, calls)
		err = e.db.Leases(e.ctx, true, nil)
		assert.ErrorIs(t, err, state.ErrInvalidArgument)
		assert.ErrorContains(t, err, "leases")
	}},

	{"leases/many", func(t *testing.T, e *env) {
		const n = 300
		for i := range n {
			_, err := e.db.Lease(e.ctx, fmt.Sprintf("job%03d", i), "a", time.Hour)
			require.NoError(t, err)
		}
		var names []string
		for _, l := range e.leases(false) {
			names = append(names, l.Name)
		}
		require.Len(t, names, n)
		assert.Equal(t, "job000", names[0])
		assert.Equal(t, "job299", names[n-1])
		assert.IsIncreasing(t, names)
	}},

	{"stats/counts", func(t *testing.T, e *env) {
		s, err := e.db.Stats(e.ctx)
		require.NoError(t, err)
		assert.Zero(t, s.Keys, "an empty store")
		assert.Zero(t, s.Leases)
		assert.Zero(t, s.LeaseNames)

		e.set("plain", "v")
		e.set("ttl", "v", state.TTL(time.Hour))
		e.set("n", 1)
		held := e.lease("held", "a", time.Hour)
		rel := e.lease("released", "a", time.Hour)
		require.NoError(t, e.db.Release(e.ctx, rel))
		_ = held

		s, err = e.db.Stats(e.ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(3), s.Keys, "live keys")
		assert.Equal(t, int64(1), s.KeysWithDeadline, "live keys with a deadline")
		assert.Equal(t, int64(1), s.Leases, "leases held now")
		assert.Equal(t, int64(2), s.LeaseNames, "lease names ever granted")
		assert.GreaterOrEqual(t, s.ExpiredKeys, int64(0))

		if e.opts.FileStats {
			assert.Equal(t, state.SchemaVersion, s.SchemaVersion)
			assert.Positive(t, s.PageSize)
			assert.Positive(t, s.Pages)
			assert.GreaterOrEqual(t, s.FreePages, int64(0))
			assert.False(t, s.Now.IsZero())
			assert.False(t, s.HighWater.Before(s.Now), "the mark is at or after every time used")
			assert.Zero(t, s.ClockBehind, "a sane clock")
		}
	}},

	{"check/sound-store", func(t *testing.T, e *env) {
		findings, err := e.db.Check(e.ctx)
		require.NoError(t, err)
		assert.Empty(t, findings, "an empty store")

		e.set("s", "text", state.TTL(time.Hour))
		e.set("i", -5)
		e.set("b", []byte{0, 1, 255})
		e.set("e", "")
		_, err = e.db.Incr(e.ctx, "c")
		require.NoError(t, err)
		l := e.lease("job", "a", time.Hour)
		require.NoError(t, e.db.Release(e.ctx, l))
		e.lease("job", "b", time.Hour)
		findings, err = e.db.Check(e.ctx)
		require.NoError(t, err)
		assert.Empty(t, findings, "a store written only through the verbs")
	}},
}
