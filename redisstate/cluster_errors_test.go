package redisstate

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClusterErrorsNameTheMasterThatReplied: in a cluster, a verb that a
// master refuses or cannot reach fails with an error naming that master
// (host:port), not the URL's list of seeds, which names every master and
// so says nothing of which one failed. Three ways a master fails:
// CLUSTERDOWN (its own view of the cluster is down: every verb on its
// keys, a transaction's reads and its EXEC, a flush, and the listings,
// whose pages go through the cluster client), a redirect that keeps
// coming back (a slot left MIGRATING to a master not importing it), and a
// master killed (nothing listens at its address). Before, every one of
// these errors named "redis at" and the seed list.
func TestClusterErrorsNameTheMasterThatReplied(t *testing.T) {
	tc := newTestCluster(t, "n:")
	s, ctx := tc.s, tc.ctx
	names := func(err error, master, what string) {
		t.Helper()
		require.Error(t, err, what)
		assert.ErrorIs(t, err, state.ErrUnavailable, what)
		assert.Contains(t, err.Error(), "redis at "+master, "%s: names the master that replied", what)
		for _, a := range tc.c.Addrs() {
			if a != master {
				assert.NotContains(t, err.Error(), a, "%s: names no other master", what)
			}
		}
	}

	// A key, a lease and a second key on one master m, and a key on
	// another master.
	key := "a"
	m := tc.owner(s.keyOf(key))
	pick := func(prefix string, of func(string) string, same bool) string {
		for i := 0; ; i++ {
			n := fmt.Sprintf("%s%d", prefix, i)
			if (tc.owner(of(n)) == m) == same {
				return n
			}
		}
	}
	lease := pick("job", s.leaseOf, true)
	other := pick("o", s.keyOf, false)
	require.NoError(t, s.Set(ctx, key, state.IntValue(1), 0))
	require.NoError(t, s.Set(ctx, other, state.IntValue(1), 0))
	l, err := s.Lease(ctx, lease, "me", 60000)
	require.NoError(t, err)

	{
		// CLUSTERDOWN. A slot of m holding none of the test's keys, taken from m
		// alone: m's view of the cluster fails, the others' stays ok.
		sl := -1
		for i := 0; sl < 0; i++ {
			z := fmt.Sprintf("z%d", i)
			if zs := slot(z); zs != slot(s.keyOf(key)) && zs != slot(s.leaseOf(lease)) && tc.owner(z) == m {
				sl = zs
			}
		}
		tc.cmd(m, "CLUSTER", "DELSLOTS", strconv.Itoa(sl))
		deadline := time.Now().Add(10 * time.Second) // a cap for a loaded machine
		for !strings.Contains(tc.cmd(m, "CLUSTER", "INFO"), "cluster_state:fail") {
			require.True(t, time.Now().Before(deadline), "cluster_state:fail on %s", m)
			time.Sleep(20 * time.Millisecond)
		}

		_, err := s.Get(ctx, key)
		names(err, m, "Get")
		names(s.Set(ctx, key, state.IntValue(2), 0), m, "Set")
		_, err = s.IncrBy(ctx, key, 1, 0)
		names(err, m, "IncrBy")
		one := state.IntValue(1)
		_, err = s.CAS(ctx, key, &one, &one, 0)
		names(err, m, "CAS")
		_, err = s.Expire(ctx, key, 60000)
		names(err, m, "Expire")
		_, err = s.TTL(ctx, key)
		names(err, m, "TTL")
		_, err = s.Del(ctx, []string{key})
		names(err, m, "Del")
		_, err = s.Lease(ctx, lease, "me", 60000)
		names(err, m, "Lease")
		names(s.Renew(ctx, l, 60000), m, "Renew")
		names(s.Release(ctx, l), m, "Release")
		names(s.Update(ctx, func(x any) error { _, err := x.(*tx).Get(key); return err }), m, "Update's read")
		names(s.Update(ctx, func(x any) error { return x.(*tx).Set(key, state.IntValue(3), 0) }), m, "Update's EXEC")
		_, _, _, err = s.Flush(ctx, []string{key}, map[string]int64{key: 1})
		names(err, m, "Flush")
		names(s.Scan(ctx, "", false, func(state.KeyInfo) error { return nil }), m, "Scan")
		names(s.Leases(ctx, true, func(state.LeaseInfo) error { return nil }), m, "Leases")
		_, err = s.Stats(ctx)
		names(err, m, "Stats")
		_, err = s.Check(ctx)
		names(err, m, "Check")

		// Through the handle, after the URL it names first.
		db := tc.db("n:")
		_, err = db.Get(ctx, key)
		require.ErrorIs(t, err, state.ErrUnavailable)
		assert.Contains(t, err.Error(), "redis at "+m+" refused the command")
		tc.cmd(m, "CLUSTER", "ADDSLOTS", strconv.Itoa(sl))
		for !strings.Contains(tc.cmd(m, "CLUSTER", "INFO"), "cluster_state:ok") {
			require.True(t, time.Now().Before(deadline.Add(time.Minute)), "cluster_state:ok on %s again", m)
			time.Sleep(20 * time.Millisecond)
		}
	}

	{
		// A redirect that keeps coming back. Left MIGRATING on its master to one that is not importing
		// it, a new key's slot sends each command back and forth
		// (ASK, then MOVED) until the verb gives up: the error names
		// one of the two masters, the one whose redirect came last,
		// never the third.
		rkey := s.keyOf("{r}new")
		from := tc.owner(rkey)
		to := tc.other(from)
		sl := strconv.Itoa(slot(rkey))
		tc.cmd(from, "CLUSTER", "SETSLOT", sl, "MIGRATING", tc.cmd(to, "CLUSTER", "MYID"))
		_, err := s.IncrBy(ctx, "{r}new", 1, 0)
		require.ErrorIs(t, err, state.ErrUnavailable)
		msg := err.Error()
		assert.Contains(t, msg, "kept redirecting it")
		assert.True(t, strings.Contains(msg, "redis at "+from+" ") != strings.Contains(msg, "redis at "+to+" "),
			"names one of %s and %s as the master that replied: %s", from, to, msg)
		for _, a := range tc.c.Addrs() {
			if a != from && a != to {
				assert.NotContains(t, msg, a, "names no third master")
			}
		}
		tc.cmd(from, "CLUSTER", "SETSLOT", sl, "STABLE")
	}

	{
		// A master killed.
		for _, srv := range tc.c.Servers {
			if srv.Addr() == m {
				srv.Kill()
			}
		}
		_, err := s.Get(ctx, key)
		names(err, m, "Get")
		_, err = s.IncrBy(ctx, key, 1, 0)
		names(err, m, "IncrBy")
		names(s.Update(ctx, func(x any) error { _, err := x.(*tx).IncrBy(key, 1, 0); return err }), m, "Update")
		names(s.Scan(ctx, "", false, func(state.KeyInfo) error { return nil }), m, "Scan")
		v, err := s.Get(ctx, other)
		require.NoError(t, err, "another master's key")
		assert.Equal(t, "1", v.String())
	}
}
