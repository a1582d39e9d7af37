package redisstate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClusterLeaseRechecksDurabilityAfterAMasterRestart: in a cluster, as
// on one server, a store that checked every master's durability checks
// again once it opens a new connection: the master that holds a lease,
// restarted with appendonly no, has lost the lease's hash, and the next
// grant there is refused with ErrNotDurable rather than handing token 1
// out again.
func TestClusterLeaseRechecksDurabilityAfterAMasterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster takes seconds to start")
	}
	c := redistest.StartCluster(t, 3)
	db := openURL(t, c.URL("d:"))
	ctx := ctxT(t)
	l, err := db.Lease(ctx, "x", "a", time.Millisecond)
	require.NoError(t, err, "every master keeps every write: the check passes, and is remembered")
	require.EqualValues(t, 1, l.Token)

	var victim *redistest.Server
	for _, srv := range c.Servers {
		if out, err := srv.Command("EXISTS", "d:lease:x"); err == nil && out == ":1" {
			victim = srv
		}
	}
	require.NotNil(t, victim, "no master holds the lease")
	victim.RestartWith(redistest.WithoutPersistence(),
		redistest.WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"))
	l, err = afterRestart(t, ctx, func() (*state.Lease, error) { return db.Lease(ctx, "x", "b", time.Minute) })
	require.ErrorIs(t, err, state.ErrNotDurable, "granted %+v on a master that lost the first grant", l)
	assert.Contains(t, err.Error(), "appendonly no")
}

// TestClusterFlushNamesTheDeltasAMasterDownDropped: a flush's keys on a
// master that is down, after keys on a live one were written, are named
// with the cause in the flush's *FlushError (ErrUnavailable: not applied);
// none is lost in silence, and none is applied twice. The live master's
// key has its delta; the other key is as it was once its master is back.
func TestClusterFlushNamesTheDeltasAMasterDownDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster takes seconds to start")
	}
	c := redistest.StartCluster(t, 3)
	db := openURL(t, c.URL("f:"))
	ctx := ctxT(t)
	ownerOf := func(key string) *redistest.Server {
		t.Helper()
		require.NoError(t, db.Set(ctx, key, 10))
		for _, srv := range c.Servers {
			if out, err := srv.Command("EXISTS", "f:k:"+key); err == nil && out == ":1" {
				return srv
			}
		}
		t.Fatalf("no master holds %q", key)
		return nil
	}
	// A flush sends its keys in sorted order: "a" first, on a master
	// that stays up, then a "b" key on another.
	live := ownerOf("a")
	var b string
	var down *redistest.Server
	for i := 0; down == nil || down == live; i++ {
		b = fmt.Sprintf("b%d", i)
		down = ownerOf(b)
	}
	require.NoError(t, db.IncrBuffered("a", 1))
	require.NoError(t, db.IncrBuffered(b, 1))
	down.Kill()
	err := db.Flush(ctx)
	var fe *state.FlushError
	require.ErrorAs(t, err, &fe)
	require.Contains(t, fe.Dropped, b, "the down master's key is named")
	assert.ErrorIs(t, fe.Dropped[b], state.ErrUnavailable)
	assert.NotContains(t, fe.Dropped, "a")
	v, err := db.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "11", v.String(), "the live master's key was written")

	down.Restart()
	eventually(t, "the master back", func() bool {
		v, err = db.Get(ctx, b)
		return err == nil
	})
	assert.Equal(t, "10", v.String(), "the dropped delta was not applied")
	require.NoError(t, db.Flush(ctx), "nothing kept to flush twice")
	v, err = db.Get(ctx, b)
	require.NoError(t, err)
	assert.Equal(t, "10", v.String())
}
