package redisstate

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClusterVerbsFollowTheirSlot: a key's slot moved to another master
// while the store's slot map still names the old one. Get, a script verb
// and an Update each meet MOVED and are run once on the new master; a
// verb that meets ASK (its key already moved, the slot still migrating)
// is sent at once to the master the reply names, after ASKING, with no
// pause and while the map still names the old master. Each is
// answered as if nothing had moved, and each that met MOVED is seen to
// have paused for it, so none passed by a map go-redis reloaded on its
// own. The pause waits for the store's map to name the new master, so the
// test does not depend on how fast the reload is.
func TestClusterVerbsFollowTheirSlot(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster takes seconds to start")
	}
	c := redistest.StartCluster(t, 3)
	s, err := open(c.URL("r:"), backendOptions())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	rkey := s.keyOf("k")
	slotN := strconv.Itoa(slot(rkey))
	password := c.Servers[0].Password()
	cmd := func(addr string, args ...string) string {
		t.Helper()
		out, err := redistest.CommandText(addr, password, args...)
		require.NoError(t, err, "%s %v", addr, args)
		return out
	}
	owner := func() string {
		t.Helper()
		m, err := s.cluster.MasterForKey(ctx, rkey)
		require.NoError(t, err)
		return m.Options().Addr
	}
	id := func(addr string) string { return cmd(addr, "CLUSTER", "MYID") }
	// begin moves the key to another master, leaving its slot migrating
	// (the old master answers ASK for it); end gives the slot to the
	// new master on every master (the old one answers MOVED).
	begin := func(from, to string) {
		cmd(to, "CLUSTER", "SETSLOT", slotN, "IMPORTING", id(from))
		cmd(from, "CLUSTER", "SETSLOT", slotN, "MIGRATING", id(to))
		host, port, err := net.SplitHostPort(to)
		require.NoError(t, err)
		cmd(from, "MIGRATE", host, port, rkey, "0", "5000")
	}
	end := func(to string) {
		cmd(to, "CLUSTER", "SETSLOT", slotN, "NODE", id(to))
		for _, a := range c.Addrs() {
			if a != to {
				cmd(a, "CLUSTER", "SETSLOT", slotN, "NODE", id(to))
			}
		}
	}

	var (
		pauses int
		want   string // the master the store's map must name before a retry
	)
	s.pause = func(ctx context.Context, _ time.Duration) error {
		pauses++
		deadline := time.Now().Add(10 * time.Second) // a cap for a loaded machine
		for owner() != want {
			if time.Now().After(deadline) {
				t.Fatalf("the store's map did not name %s within 10s", want)
			}
			s.cluster.ReloadState(ctx)
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	moved := func(to string) {
		begin(owner(), to)
		end(to)
		want, pauses = to, 0
	}

	n, err := s.IncrBy(ctx, "k", 1, 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	first := owner()
	var others []string
	for _, a := range c.Addrs() {
		if a != first {
			others = append(others, a)
		}
	}

	moved(others[0])
	v, err := s.Get(ctx, "k")
	require.NoError(t, err, "Get after MOVED")
	assert.Equal(t, "1", v.String())
	assert.Positive(t, pauses, "Get met MOVED")

	moved(others[1])
	n, err = s.IncrBy(ctx, "k", 1, 0)
	require.NoError(t, err, "a script after MOVED")
	assert.EqualValues(t, 2, n)
	assert.Positive(t, pauses, "the script met MOVED")

	moved(first)
	require.NoError(t, s.Update(ctx, func(x any) error {
		_, err := x.(*tx).IncrBy("k", 1, 0)
		return err
	}), "an Update after MOVED")
	assert.Positive(t, pauses, "the Update met MOVED")

	begin(first, others[0])
	want, pauses = others[0], 0
	n, err = s.IncrBy(ctx, "k", 1, 0)
	require.NoError(t, err, "a script after ASK")
	assert.EqualValues(t, 4, n, "each verb ran once")
	assert.Zero(t, pauses, "ASK is followed at once, to the master it names")
	assert.Equal(t, first, owner(), "the store's map still names the old master")
	end(others[0])
	assert.Equal(t, "i:4", cmd(others[0], "GET", rkey), "the new master holds the key")
}
