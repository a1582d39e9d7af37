package redisstate

import (
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/backend"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// migrateToNewMaster adds a master to tc's cluster, begins moving the slot
// of the hash tag {f} to it, as redis-cli --cluster reshard onto a fresh
// node does, and moves the Redis keys rkeys (of that slot) there. It
// returns the old master and the new one; the slot stays migrating.
func migrateToNewMaster(tc *testCluster, rkeys ...string) (from, to string) {
	tc.t.Helper()
	to = tc.addMaster().Addr()
	from = tc.owner(rkeys[0])
	tc.beginMigration(rkeys[0], from, to)
	host, port, err := net.SplitHostPort(to)
	require.NoError(tc.t, err)
	for _, k := range rkeys {
		assert.Equal(tc.t, "OK", tc.cmd(from, "MIGRATE", host, port, k, "0", "5000"), "MIGRATE %s", k)
	}
	require.Nil(tc.t, tc.s.masterAt(tc.ctx, to), "the store's map does not name the importing master")
	return from, to
}

// TestClusterVerbsFollowASKToANewMaster: a slot migrates to a master just
// added to the cluster, which owns no slot yet, so no slot map names it,
// and its keys already moved there. Get, a script verb (Incr), a buffered
// increment's flush and a lease grant run once on the new master, through
// the store's own client of it, and their values are there after the
// migration ends. Before, every verb on those keys reloaded the map (which
// never named the master), was redirected eight times and failed with
// ErrUnavailable.
func TestClusterVerbsFollowASKToANewMaster(t *testing.T) {
	tc := newTestCluster(t, "n:")
	db := tc.db("n:")
	ctx := tc.ctx
	rkey := tc.s.keyOf("{f}x")
	require.NoError(t, db.Set(ctx, "{f}x", 1))
	l, err := db.Lease(ctx, "{f}job", "me", time.Minute)
	require.NoError(t, err)
	require.NoError(t, db.Release(ctx, l))
	from, to := migrateToNewMaster(tc, rkey, tc.s.leaseOf("{f}job"))

	v, err := db.Get(ctx, "{f}x")
	require.NoError(t, err, "Get of a key on the new master")
	assert.Equal(t, "1", v.String())
	n, err := db.Incr(ctx, "{f}x")
	require.NoError(t, err, "a script verb on the new master")
	assert.EqualValues(t, 2, n)
	require.NoError(t, db.IncrBuffered("{f}x", 5))
	require.NoError(t, db.Flush(ctx), "a flush on the new master")
	l, err = db.Lease(ctx, "{f}job", "you", time.Minute)
	require.NoError(t, err, "a grant on the new master")
	assert.EqualValues(t, 2, l.Token, "the lease's hash moved with its token")
	sl := strconv.Itoa(slot(rkey))
	assert.Equal(t, "2", tc.cmd(to, "CLUSTER", "COUNTKEYSINSLOT", sl), "the new master holds the key and the lease")
	assert.Equal(t, "0", tc.cmd(from, "CLUSTER", "COUNTKEYSINSLOT", sl))

	tc.endMigration(rkey, to)
	v, err = db.Get(ctx, "{f}x")
	require.NoError(t, err)
	assert.Equal(t, "7", v.String(), "each verb ran once")
	_, err = db.Lease(ctx, "{f}job", "me", time.Minute)
	var held *state.LeaseHeldError
	require.ErrorAs(t, err, &held)
	assert.Equal(t, "you", held.Owner)
}

// TestClusterDurableWritesToANewMasterAreChecked: the durability check
// asks the masters of the slot map, which does not name a master importing
// its first slot. A lease grant, and a SyncFull store's write, that ASK
// sends to such a master with appendfsync everysec are refused with
// ErrNotDurable naming it, before they are sent (nothing changes there),
// and a SyncFull flush keeps its delta; reads still work. Once the master
// keeps every write they run. The store's own client of it counts its
// connections as go-redis's do, so after a new connection to it a write
// that ran there before the check refused it is ErrOutcomeUnknown and
// ErrNotDurable, and the next one is refused before it is sent. Before,
// the grant failed with ErrUnavailable after eight redirects: no write
// reached the new master.
func TestClusterDurableWritesToANewMasterAreChecked(t *testing.T) {
	tc := newTestCluster(t, "n:")
	ctx := tc.ctx
	sf, err := open(tc.c.URL("n:"), backend.Options{SyncFull: true, BusyTimeout: state.DefaultBusyTimeout})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sf.Close() })
	rkey, lkey := tc.s.keyOf("{f}x"), tc.s.leaseOf("{f}job")
	require.NoError(t, tc.s.Set(ctx, "{f}x", state.IntValue(1), 0))
	l, err := tc.s.Lease(ctx, "{f}job", "me", 60000)
	require.NoError(t, err)
	require.NoError(t, tc.s.Release(ctx, l))
	_, to := migrateToNewMaster(tc, rkey, lkey)
	tc.cmd(to, "CONFIG", "SET", "appendfsync", "everysec")

	_, err = tc.s.Lease(ctx, "{f}job", "you", 60000)
	require.ErrorIs(t, err, state.ErrNotDurable, "a grant on the new master")
	assert.NotErrorIs(t, err, state.ErrOutcomeUnknown, "refused before it was sent")
	assert.Contains(t, err.Error(), "redis at "+to+" has appendonly yes and appendfsync everysec")

	_, err = sf.IncrBy(ctx, "{f}x", 1, 0)
	require.ErrorIs(t, err, state.ErrNotDurable, "a SyncFull write on the new master")
	assert.NotErrorIs(t, err, state.ErrOutcomeUnknown, "refused before it was sent")
	assert.Contains(t, err.Error(), "state.WithSync(state.SyncFull)")
	_, kept, ran, err := sf.Flush(ctx, []string{"{f}x"}, map[string]int64{"{f}x": 5})
	require.ErrorIs(t, err, state.ErrNotDurable, "a SyncFull flush on the new master")
	assert.False(t, ran, "the flush keeps its delta")
	assert.Empty(t, kept)
	v, err := sf.Get(ctx, "{f}x")
	require.NoError(t, err, "reads need no check")
	assert.Equal(t, "1", v.String(), "nothing was written")

	tc.cmd(to, "CONFIG", "SET", "appendfsync", "always")
	l, err = tc.s.Lease(ctx, "{f}job", "you", 60000)
	require.NoError(t, err, "a grant once the new master keeps every write")
	assert.EqualValues(t, 2, l.Token, "the refused grant made none")
	n, err := sf.IncrBy(ctx, "{f}x", 1, 0)
	require.NoError(t, err, "a SyncFull write once the new master keeps every write")
	assert.EqualValues(t, 2, n)

	// The store's own client of a master counts the connections it opens,
	// as go-redis's do (its options are theirs), which the check after a
	// write relies on.
	fresh, err := open(tc.c.URL("n:"), backendOptions())
	require.NoError(t, err)
	t.Cleanup(func() { _ = fresh.Close() })
	gen := fresh.conns.Load()
	own := fresh.nodes.client(to)
	require.NotNil(t, own)
	require.NoError(t, own.Ping(ctx).Err())
	require.Greater(t, fresh.conns.Load(), gen, "the connection of the store's own client is counted")

	// The check passed and is kept; the master stops keeping every write
	// and the store's connections to it are closed: the next write reaches
	// it over a new one, and is checked again after it ran.
	tc.cmd(to, "CONFIG", "SET", "appendfsync", "everysec")
	tc.cmd(to, "CLIENT", "KILL", "TYPE", "normal")
	tries := 0
	for {
		tries++
		require.LessOrEqual(t, tries, 100, "an answer from the new master over a new connection: %v", err)
		err = sf.Set(ctx, "{f}x", state.IntValue(int64(tries)), 0)
		if !errors.Is(err, state.ErrUnavailable) && (!errors.Is(err, state.ErrOutcomeUnknown) || errors.Is(err, state.ErrNotDurable)) {
			break
		}
	}
	require.ErrorIs(t, err, state.ErrNotDurable)
	require.ErrorIs(t, err, state.ErrOutcomeUnknown, "the write ran before the check that refused the master")
	assert.Contains(t, err.Error(), "redis at "+to+" has appendonly yes and appendfsync everysec")
	err = sf.Set(ctx, "{f}x", state.IntValue(-1), 0)
	require.ErrorIs(t, err, state.ErrNotDurable)
	assert.NotErrorIs(t, err, state.ErrOutcomeUnknown, "refused before it was sent")
	v, err = sf.Get(ctx, "{f}x")
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(tries), v.String(), "the write whose outcome was not given ran, the refused one did not")
}
