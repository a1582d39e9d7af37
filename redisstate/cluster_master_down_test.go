package redisstate_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/hooks"
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

// TestClusterFlushKeepsTheDeltasOfAMasterDown: a flush's keys on a
// master that is down, after keys on a live one were written, go back into
// the buffer and are named with the cause in the flush's *FlushError Kept
// (ErrUnavailable: not applied); the next flush, once the master is back,
// writes them, once. A background flush that keeps them has lost nothing,
// so the next Flush reports no error of it. Close, which has no next
// flush, names them dropped. The live master's keys are written each time.
// A master whose answer is lost has its keys dropped, and the flush still
// writes the other masters' keys.
func TestClusterFlushKeepsTheDeltasOfAMasterDown(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster takes seconds to start")
	}
	c := redistest.StartCluster(t, 3)
	// Without background work: the test's own Flush is what it checks, and
	// a background flush (every 250 ms by default) that ran once the master
	// was back wrote the kept delta before the test read it was not applied
	// (a loaded machine: "12", not "10").
	db, err := state.Open(c.URL("f:"), state.WithoutBackground())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
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
	get := func(db *state.DB, key string) string {
		t.Helper()
		v, err := db.Get(ctx, key)
		require.NoError(t, err, "get %s", key)
		return v.String()
	}
	restart := func() {
		t.Helper()
		down.Restart()
		eventually(t, "the master back", func() bool {
			_, err := db.Get(ctx, b)
			return err == nil
		})
	}

	t.Run("Flush", func(t *testing.T) {
		require.NoError(t, db.IncrBuffered("a", 1))
		require.NoError(t, db.IncrBuffered(b, 1))
		down.Kill()
		err := db.Flush(ctx)
		var fe *state.FlushError
		require.ErrorAs(t, err, &fe)
		assert.Empty(t, fe.Dropped, "nothing dropped")
		require.Contains(t, fe.Kept, b, "the down master's key is named")
		assert.ErrorIs(t, fe.Kept[b], state.ErrUnavailable)
		assert.NotContains(t, fe.Kept, "a")
		assert.Contains(t, err.Error(), fmt.Sprintf(`kept for the next flush %q (delta 1 not applied`, b))
		assert.Equal(t, "11", get(db, "a"), "the live master's key was written")

		require.NoError(t, db.IncrBuffered(b, 1), "added to the kept delta")
		restart()
		assert.Equal(t, "10", get(db, b), "the kept delta was not applied")
		require.NoError(t, db.Flush(ctx))
		assert.Equal(t, "12", get(db, b), "the kept delta and the later one, once each")
		require.NoError(t, db.Flush(ctx))
		assert.Equal(t, "12", get(db, b), "nothing left to flush twice")
		assert.Equal(t, "11", get(db, "a"))
	})

	t.Run("background", func(t *testing.T) {
		obs := &keptFlushes{kept: make(chan error, 64)}
		bg, err := state.Open(c.URL("f:"), state.WithFlushInterval(20*time.Millisecond),
			hooks.Option(hooks.Engine{Flushes: obs}).(state.Option))
		require.NoError(t, err)
		t.Cleanup(func() { _ = bg.Close() })
		down.Kill()
		require.NoError(t, bg.IncrBuffered("a", 1))
		require.NoError(t, bg.IncrBuffered(b, 1))
		select {
		case err := <-obs.kept:
			var fe *state.FlushError
			require.ErrorAs(t, err, &fe)
			assert.Contains(t, fe.Kept, b)
		case <-ctx.Done():
			t.Fatal("no background flush kept the down master's key before the test's deadline")
		}
		restart()
		require.NoError(t, bg.Flush(ctx), "the background flush that kept a delta lost none, so it has no error to report")
		assert.Equal(t, "12", get(bg, "a"))
		assert.Equal(t, "13", get(bg, b), "the kept delta was written once")
		require.NoError(t, bg.Close())
	})

	t.Run("Close", func(t *testing.T) {
		last, err := state.Open(c.URL("f:"), state.WithoutBackground())
		require.NoError(t, err)
		require.NoError(t, last.IncrBuffered("a", 1))
		require.NoError(t, last.IncrBuffered(b, 1))
		down.Kill()
		err = last.Close()
		var fe *state.FlushError
		require.ErrorAs(t, err, &fe)
		assert.Empty(t, fe.Kept, "Close keeps nothing")
		require.Contains(t, fe.Dropped, b, "the down master's key is named dropped")
		assert.ErrorIs(t, fe.Dropped[b], state.ErrUnavailable)
		assert.Contains(t, err.Error(), "Close cannot keep it")
		assert.NotContains(t, fe.Dropped, "a")
		restart()
		assert.Equal(t, "13", get(db, "a"), "the live master's key was written")
		assert.Equal(t, "13", get(db, b), "the dropped delta was not applied")
	})

	// A first master whose answer is lost may have applied its keys: they
	// are dropped, named with ErrOutcomeUnknown, and the flush goes on to
	// the other masters, whose keys it writes.
	t.Run("lost answer", func(t *testing.T) {
		lost, err := state.Open(c.URL("f:")+"&read_timeout=300ms", state.WithoutBackground())
		require.NoError(t, err)
		t.Cleanup(func() { _ = lost.Close() })
		get(lost, "a") // a connection to each master in the pool
		get(lost, b)
		require.NoError(t, lost.IncrBuffered("a", 1))
		require.NoError(t, lost.IncrBuffered(b, 1))
		live.Pause() // SIGSTOP: the script is sent, no answer comes
		err = lost.Flush(ctx)
		live.Resume()
		var fe *state.FlushError
		require.ErrorAs(t, err, &fe)
		require.Contains(t, fe.Dropped, "a")
		assert.ErrorIs(t, fe.Dropped["a"], state.ErrOutcomeUnknown)
		assert.Empty(t, fe.Kept)
		assert.NotContains(t, fe.Dropped, b)
		assert.Equal(t, "14", get(lost, b), "the other master's key was written")
		require.NoError(t, lost.Flush(ctx), "nothing kept to flush twice")
		assert.Equal(t, "14", get(lost, "a"), "the lost answer's script ran once, when its master went on")
		assert.Equal(t, "14", get(lost, b))
		require.NoError(t, lost.Close())
	})
}

// keptFlushes is a flush observer that sends the error of each flush that
// wrote some keys and kept others for the next flush.
type keptFlushes struct{ kept chan error }

// Flushing sends the flush's error when it kept some deltas.
func (o *keptFlushes) Flushing(map[string]int64) (func(int64), func(int64, error, bool)) {
	return nil, func(_ int64, err error, restored bool) {
		var fe *state.FlushError
		if !restored && errors.As(err, &fe) && len(fe.Kept) > 0 {
			select {
			case o.kept <- err:
			default:
			}
		}
	}
}
