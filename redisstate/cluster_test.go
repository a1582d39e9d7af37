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

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster takes seconds to start")
	}
	c := redistest.StartCluster(t, 3)
	db := openURL(t, c.URL("c:"))
	ctx := ctxT(t)

	var keys []string
	for i := range 30 {
		k := fmt.Sprintf("key%02d", i)
		keys = append(keys, k)
		n, err := db.IncrBy(ctx, k, int64(i), state.TTL(time.Hour))
		require.NoError(t, err)
		assert.EqualValues(t, i, n)
	}
	var seen []string
	require.NoError(t, db.Scan(ctx, "key", false, func(k state.KeyInfo) error { seen = append(seen, k.Key); return nil }))
	assert.Equal(t, keys, seen, "every master's keys, in byte order")

	for _, k := range keys {
		require.NoError(t, db.IncrBuffered(k, 100))
	}
	require.NoError(t, db.Flush(ctx), "a flush across slots")
	v, err := db.Get(ctx, "key07")
	require.NoError(t, err)
	assert.Equal(t, "107", v.String())

	n, err := db.Del(ctx, append(keys[:10:10], keys[0], "absent")...)
	require.NoError(t, err)
	assert.Equal(t, 10, n, "a Del across slots")

	l, err := db.Lease(ctx, "job", "a", time.Minute)
	require.NoError(t, err, "every master keeps every write")
	assert.EqualValues(t, 1, l.Token)

	// A transaction's keys must share a slot.
	err = db.Update(ctx, func(tx *state.Tx) error {
		if _, err := tx.Get("key20"); err != nil {
			return err
		}
		return tx.Set("key21", 1)
	})
	require.ErrorIs(t, err, state.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "{user42}")
	assert.Contains(t, err.Error(), `"key20"`)
	assert.Contains(t, err.Error(), `"key21"`)
	v, _ = db.Get(ctx, "key21")
	assert.Equal(t, "121", v.String(), "nothing written")

	// In a cluster a transaction's time is its keys' master's: asked for
	// before any key, there is none to ask.
	err = db.Update(ctx, func(tx *state.Tx) error {
		_, err := tx.Now()
		return err
	})
	require.ErrorIs(t, err, state.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "read or write a key before asking for Now")
	require.NoError(t, db.Update(ctx, func(tx *state.Tx) error {
		if _, err := tx.Get("key20"); err != nil {
			return err
		}
		_, err := tx.Now()
		return err
	}), "after a key, the transaction has its time")

	// With one hash tag they do.
	require.NoError(t, db.Update(ctx, func(tx *state.Tx) error {
		if _, err := tx.IncrBy("{user42}:balance", 5); err != nil {
			return err
		}
		if _, err := tx.Lease("{user42}:lock", "a", time.Minute); err != nil {
			return err
		}
		return tx.Set("{user42}:history", "paid 5")
	}))
	v, err = db.Get(ctx, "{user42}:balance")
	require.NoError(t, err)
	assert.Equal(t, "5", v.String())

	st, err := db.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 22, st.Keys)
	assert.EqualValues(t, 2, st.LeaseNames)
	findings, err := db.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, findings)
}

// TestOpenOfAClusterNodeAsOneServerIsRefused: a redis:// URL naming a node
// of a cluster is refused at Open, saying to use redis+cluster://; before,
// it opened, and each verb on a key of another master's slot failed with
// MOVED.
func TestOpenOfAClusterNodeAsOneServerIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster takes seconds to start")
	}
	c := redistest.StartCluster(t, 3)
	db, err := state.Open("redis://" + c.Addrs()[0] + "/")
	if err == nil {
		_ = db.Close()
	}
	require.ErrorIs(t, err, state.ErrInvalidArgument)
	assert.ErrorContains(t, err, "is a node of a cluster")
	assert.ErrorContains(t, err, "redis+cluster://")
}
