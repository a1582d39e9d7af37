package redisstate

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testCluster is a three-master cluster, a store on it and the commands
// a test needs to move a slot by hand.
type testCluster struct {
	t   *testing.T
	c   *redistest.Cluster
	s   *store
	ctx context.Context
}

func newTestCluster(t *testing.T, prefix string) *testCluster {
	if testing.Short() {
		t.Skip("a cluster takes seconds to start")
	}
	c := redistest.StartCluster(t, 3)
	s, err := open(c.URL(prefix), backendOptions())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &testCluster{t: t, c: c, s: s, ctx: ctx}
}

// db opens a state.DB on the cluster, without background work.
func (tc *testCluster) db(prefix string) *state.DB {
	db, err := state.Open(tc.c.URL(prefix), state.WithoutBackground())
	require.NoError(tc.t, err)
	tc.t.Cleanup(func() { _ = db.Close() })
	return db
}

// cmd sends one command to the node at addr.
func (tc *testCluster) cmd(addr string, args ...string) string {
	tc.t.Helper()
	out, err := redistest.CommandText(addr, tc.c.Servers[0].Password(), args...)
	require.NoError(tc.t, err, "%s %v", addr, args)
	return out
}

// owner returns the master that owns rkey's slot, the map reloaded first.
func (tc *testCluster) owner(rkey string) string {
	tc.t.Helper()
	tc.s.cluster.ReloadState(tc.ctx)
	m, err := tc.s.cluster.MasterForKey(tc.ctx, rkey)
	require.NoError(tc.t, err)
	return m.Options().Addr
}

// other returns a master that is not addr.
func (tc *testCluster) other(addr string) string {
	for _, x := range tc.c.Addrs() {
		if x != addr {
			return x
		}
	}
	panic("no other master")
}

// beginMigration leaves rkey's slot MIGRATING from -> to (IMPORTING on
// to), as redis-cli --cluster reshard does while it moves the slot's keys.
func (tc *testCluster) beginMigration(rkey, from, to string) {
	sl := strconv.Itoa(slot(rkey))
	tc.cmd(to, "CLUSTER", "SETSLOT", sl, "IMPORTING", tc.cmd(from, "CLUSTER", "MYID"))
	tc.cmd(from, "CLUSTER", "SETSLOT", sl, "MIGRATING", tc.cmd(to, "CLUSTER", "MYID"))
}

// endMigration gives rkey's slot to the master to, on every master.
func (tc *testCluster) endMigration(rkey, to string) {
	sl := strconv.Itoa(slot(rkey))
	id := tc.cmd(to, "CLUSTER", "MYID")
	tc.cmd(to, "CLUSTER", "SETSLOT", sl, "NODE", id)
	for _, x := range tc.c.Addrs() {
		if x != to {
			tc.cmd(x, "CLUSTER", "SETSLOT", sl, "NODE", id)
		}
	}
}

// addMaster starts a master, joins it to the cluster (CLUSTER MEET) and
// waits until every node knows it and it sees the cluster ok. It owns no
// slot, so CLUSTER SLOTS does not list it: the store's map does not name
// it.
func (tc *testCluster) addMaster() *redistest.Server {
	t := tc.t
	t.Helper()
	n := redistest.Start(t, redistest.WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"))
	host, port, err := net.SplitHostPort(n.Addr())
	require.NoError(t, err)
	tc.cmd(tc.c.Addrs()[0], "CLUSTER", "MEET", host, port)
	nid := tc.cmd(n.Addr(), "CLUSTER", "MYID")
	deadline := time.Now().Add(30 * time.Second) // a cap for a loaded machine
	for _, a := range append(tc.c.Addrs(), n.Addr()) {
		for {
			nodes := tc.cmd(a, "CLUSTER", "NODES")
			if strings.Count(nodes, "connected") == len(tc.c.Servers)+1 && !strings.Contains(nodes, "handshake") && strings.Contains(nodes, nid) {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s does not know the new master within 30s: %s", a, nodes)
			time.Sleep(20 * time.Millisecond)
		}
	}
	for !strings.Contains(tc.cmd(n.Addr(), "CLUSTER", "INFO"), "cluster_state:ok") {
		require.True(t, time.Now().Before(deadline), "the new master's cluster_state:ok within 30s")
		time.Sleep(20 * time.Millisecond)
	}
	require.Nil(t, tc.s.masterAt(tc.ctx, n.Addr()), "the store's map does not name the new master")
	return n
}

// TestClusterFlushKeepsADeltaARedirectRefused: a slot MIGRATING on its
// master whose target is not IMPORTING it (a migration half set up) sends
// every command on a new key back and forth (ASK, then MOVED), so the
// redirect reaches the caller. It means the command never ran: the flush
// answers ErrUnavailable naming the slot, keeps the delta, and the flush
// after the migration is undone writes it once. Before, the redirect was
// unclassified, so the flush took it for "may have run" and dropped the
// delta: Get found nothing.
func TestClusterFlushKeepsADeltaARedirectRefused(t *testing.T) {
	tc := newTestCluster(t, "r:")
	db := tc.db("r:")
	rkey := tc.s.keyOf("fresh")
	from := tc.owner(rkey)
	to := tc.other(from)
	sl := strconv.Itoa(slot(rkey))
	tc.cmd(from, "CLUSTER", "SETSLOT", sl, "MIGRATING", tc.cmd(to, "CLUSTER", "MYID"))

	require.NoError(t, db.IncrBuffered("fresh", 5))
	err := db.Flush(tc.ctx)
	require.Error(t, err, "the redirect cannot be followed")
	assert.ErrorIs(t, err, state.ErrUnavailable)
	assert.NotErrorIs(t, err, state.ErrOutcomeUnknown)
	assert.Contains(t, err.Error(), "slot "+sl+" is moving")

	tc.cmd(from, "CLUSTER", "SETSLOT", sl, "STABLE")
	require.NoError(t, db.Flush(tc.ctx))
	v, err := db.Get(tc.ctx, "fresh")
	require.NoError(t, err, "the +5 a redirect refused was kept and written by the next flush")
	assert.Equal(t, "5", v.String())
	require.NoError(t, db.Flush(tc.ctx))
	v, err = db.Get(tc.ctx, "fresh")
	require.NoError(t, err)
	assert.Equal(t, "5", v.String(), "written once")
}

// TestClusterVerbsFollowASKDuringAMigration: a new key whose slot is
// migrating (the old master answers ASK for it). A script verb, Get, a
// buffered increment's flush and a lease grant run once on the importing
// master, sent there after ASKING, while the migration lasts (the lease
// shares the key's hash tag, so its slot); the values
// are there after it ends. An Update, which is run only on the master that
// owns the slot, waits for the migration to end, which this one never
// does, and fails once the wait's bound (5 s) passed with ErrUnavailable
// saying the slot is moving (before: ErrBusy, "conflicted with other
// writers"). Before, every verb reloaded
// the map (still naming the old master), was redirected eight times and
// failed with the raw ASK, and the flush dropped its delta.
func TestClusterVerbsFollowASKDuringAMigration(t *testing.T) {
	tc := newTestCluster(t, "r:")
	db := tc.db("r:")
	ctx := tc.ctx
	rkey := tc.s.keyOf("{f}x")
	from := tc.owner(rkey)
	to := tc.other(from)
	tc.beginMigration(rkey, from, to)

	n, err := db.Incr(ctx, "{f}x")
	require.NoError(t, err, "a script verb during the migration")
	assert.EqualValues(t, 1, n)
	v, err := db.Get(ctx, "{f}x")
	require.NoError(t, err, "Get during the migration")
	assert.Equal(t, "1", v.String())

	require.NoError(t, db.IncrBuffered("{f}x", 5))
	require.NoError(t, db.Flush(ctx), "a flush during the migration")
	v, err = db.Get(ctx, "{f}x")
	require.NoError(t, err)
	assert.Equal(t, "6", v.String())

	_, err = db.Lease(ctx, "{f}job", "me", time.Minute)
	require.NoError(t, err, "a grant during the migration")

	err = db.Update(ctx, func(x *state.Tx) error { _, err := x.Incr("{f}x"); return err })
	require.Error(t, err)
	assert.ErrorIs(t, err, state.ErrUnavailable)
	assert.NotErrorIs(t, err, state.ErrBusy)
	assert.Contains(t, err.Error(), "moving between masters")

	assert.Equal(t, "2", tc.cmd(to, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot(rkey))), "the importing master holds the key and the lease")
	assert.Equal(t, "0", tc.cmd(from, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot(rkey))))
	tc.endMigration(rkey, to)
	v, err = db.Get(ctx, "{f}x")
	require.NoError(t, err)
	assert.Equal(t, "6", v.String(), "each verb ran once")
}

// TestClusterDelAcrossSlotsPartlyApplied: a Del whose first slot's keys
// were deleted and whose second slot's master is down answers
// ErrOutcomeUnknown naming what was deleted and what was not. Before, it
// answered a bare ErrUnavailable, which says nothing was applied.
func TestClusterDelAcrossSlotsPartlyApplied(t *testing.T) {
	tc := newTestCluster(t, "d:")
	db := tc.db("d:")
	ctx := tc.ctx
	k1 := "a"
	m1 := tc.owner(tc.s.keyOf(k1))
	var k2, m2 string
	for i := 0; ; i++ {
		k2 = fmt.Sprintf("b%d", i)
		if m2 = tc.owner(tc.s.keyOf(k2)); m2 != m1 {
			break
		}
	}
	require.NoError(t, db.Set(ctx, k1, 1))
	require.NoError(t, db.Set(ctx, k2, 2))
	for _, srv := range tc.c.Servers {
		if srv.Addr() == m2 {
			srv.Kill()
		}
	}
	n, err := db.Del(ctx, k1, k2)
	require.Error(t, err)
	assert.Equal(t, 1, n, "the first slot's key was deleted")
	assert.ErrorIs(t, err, state.ErrOutcomeUnknown, "part of the Del was applied")
	assert.Contains(t, err.Error(), strconv.Quote(k1))
	assert.Contains(t, err.Error(), strconv.Quote(k2))
	_, err = db.Get(ctx, k1)
	assert.ErrorIs(t, err, state.ErrNotFound, "k1 was deleted")
}

// TestClusterListingsFailWhenAMasterCannotRead: a master whose own view of
// the cluster is down (cluster_state:fail, made here with CLUSTER DELSLOTS
// of a slot it owned) answers SCAN but refuses key reads with CLUSTERDOWN.
// Leases, Check and Stats fail with ErrUnavailable, as Scan does. Before,
// Leases reported ErrCorrupt, Check findings on the sound key and lease,
// and Stats counted no held lease with no error.
func TestClusterListingsFailWhenAMasterCannotRead(t *testing.T) {
	tc := newTestCluster(t, "l:")
	db := tc.db("l:")
	ctx := tc.ctx
	_, err := db.Lease(ctx, "job", "me", time.Minute)
	require.NoError(t, err)
	m := tc.owner(tc.s.leaseOf("job"))
	var key string
	for i := 0; ; i++ {
		key = fmt.Sprintf("v%d", i)
		if tc.owner(tc.s.keyOf(key)) == m {
			break
		}
	}
	require.NoError(t, db.Set(ctx, key, 7))

	sl := -1 // a slot m owns that holds none of the test's keys
	for i := 0; sl < 0; i++ {
		z := fmt.Sprintf("z%d", i)
		zs := slot(z)
		if zs == slot(tc.s.leaseOf("job")) || zs == slot(tc.s.keyOf(key)) {
			continue
		}
		if tc.owner(z) == m {
			sl = zs
		}
	}
	tc.cmd(m, "CLUSTER", "DELSLOTS", strconv.Itoa(sl))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(tc.cmd(m, "CLUSTER", "INFO"), "cluster_state:fail") {
		require.True(t, time.Now().Before(deadline), "cluster_state:fail on %s", m)
		time.Sleep(20 * time.Millisecond)
	}

	err = db.Scan(ctx, "", false, func(state.KeyInfo) error { return nil })
	assert.ErrorIs(t, err, state.ErrUnavailable, "Scan")
	err = db.Leases(ctx, true, func(state.LeaseInfo) error { return nil })
	assert.ErrorIs(t, err, state.ErrUnavailable, "Leases")
	assert.NotErrorIs(t, err, state.ErrCorrupt, "a down cluster is not a damaged lease")
	findings, err := db.Check(ctx)
	assert.ErrorIs(t, err, state.ErrUnavailable, "Check")
	assert.Empty(t, findings, "Check reports no outage as damage")
	_, err = db.Stats(ctx)
	assert.ErrorIs(t, err, state.ErrUnavailable, "Stats")
}

// TestClusterLeaseWaitReplicasFollowsASlotMove: with wait_replicas, a grant
// runs on a connection of its own (for WAIT). Its lease's slot moved while
// the store's map names the old master: the grant meets MOVED, the map is
// reloaded and it runs on the new master, whose WAIT finds no replica
// (ErrOutcomeUnknown, as before the move). Before, it failed with the raw
// MOVED until go-redis reloaded its map on its own.
func TestClusterLeaseWaitReplicasFollowsASlotMove(t *testing.T) {
	tc := newTestCluster(t, "w:")
	s2, err := open(tc.c.URL("w:")+"&wait_replicas=1", backendOptions())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	ctx := tc.ctx
	rkey := s2.leaseOf("job")
	_, err = s2.Lease(ctx, "job", "me", 60000)
	require.ErrorIs(t, err, state.ErrOutcomeUnknown, "no replica acknowledges the grant")
	from := tc.owner(rkey)
	to := tc.other(from)
	tc.beginMigration(rkey, from, to)
	host, port, _ := strings.Cut(to, ":")
	tc.cmd(from, "MIGRATE", host, port, rkey, "0", "5000")
	tc.endMigration(rkey, to)

	pauses := 0
	s2.pause = func(ctx context.Context, _ time.Duration) error {
		pauses++
		deadline := time.Now().Add(10 * time.Second)
		for {
			m, err := s2.cluster.MasterForKey(ctx, rkey)
			if err == nil && m.Options().Addr == to {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the store's map did not name %s within 10s", to)
			}
			s2.cluster.ReloadState(ctx)
			time.Sleep(5 * time.Millisecond)
		}
	}
	m, err := s2.cluster.MasterForKey(ctx, rkey)
	require.NoError(t, err)
	require.Equal(t, from, m.Options().Addr, "the store's map still names the old master")

	_, err = s2.Lease(ctx, "job", "me", 60000)
	require.ErrorIs(t, err, state.ErrOutcomeUnknown, "granted on the new master, which has no replica")
	assert.NotContains(t, err.Error(), "MOVED")
	assert.Contains(t, err.Error(), "replicas")
	assert.Positive(t, pauses, "the grant met MOVED")
	assert.Equal(t, "me", tc.cmd(to, "HGET", rkey, "owner"))
}
