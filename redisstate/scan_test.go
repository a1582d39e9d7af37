package redisstate_test

import (
	"math"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScanStatsCheck(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "b:2", 2, state.TTL(time.Hour)))
	require.NoError(t, db.Set(ctx, "b:1", "one"))
	require.NoError(t, db.Set(ctx, "a*[?]", "glob"))
	require.NoError(t, db.Set(ctx, "c", "last"))
	_, err := db.Lease(ctx, "held", "a", time.Hour)
	require.NoError(t, err)
	l, err := db.Lease(ctx, "free", "a", time.Hour)
	require.NoError(t, err)
	require.NoError(t, db.Release(ctx, l))
	redisCmd(t, srv, "SET", "other:k:x", "i:1") // another prefix: not ours

	var keys []string
	require.NoError(t, db.Scan(ctx, "", false, func(k state.KeyInfo) error {
		keys = append(keys, k.Key)
		if k.Key == "b:2" {
			assert.Greater(t, k.Left, 59*time.Minute)
			assert.WithinDuration(t, db.Now().Add(time.Hour), k.Expires, 5*time.Second)
		}
		return nil
	}))
	assert.Equal(t, []string{"a*[?]", "b:1", "b:2", "c"}, keys)
	keys = nil
	require.NoError(t, db.Scan(ctx, "a*", true, func(k state.KeyInfo) error { keys = append(keys, k.Key); return nil }))
	assert.Equal(t, []string{"a*[?]"}, keys, "the prefix is bytes, not a pattern")

	st, err := db.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 4, st.Keys)
	assert.EqualValues(t, 1, st.KeysWithDeadline)
	assert.EqualValues(t, 1, st.Leases)
	assert.EqualValues(t, 2, st.LeaseNames)
	assert.WithinDuration(t, db.Now(), st.Now, 5*time.Second)

	findings, err := db.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, findings, "a sound store")

	n, err := db.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "Redis expires keys itself")

	// Damage from outside.
	redisCmd(t, srv, "SET", "t:k:untagged", "7")
	redisCmd(t, srv, "SET", "t:k:badint", "i:12x")
	redisCmd(t, srv, "SET", "t:k:padded", "i:007") // 7, but CAS compares stored strings
	redisCmd(t, srv, "RPUSH", "t:k:list", "x")
	redisCmd(t, srv, "HSET", "t:lease:broken", "owner", "a", "token", "0", "expires", "0")
	redisCmd(t, srv, "HSET", "t:lease:partial", "owner", "a")
	findings, err = db.Check(ctx)
	require.NoError(t, err)
	assert.Len(t, findings, 6, "%q", findings)
	err = db.Scan(ctx, "", false, func(state.KeyInfo) error { return nil })
	require.ErrorIs(t, err, state.ErrCorrupt)
	assert.Contains(t, err.Error(), `"badint"`)
	_, err = db.Get(ctx, "untagged")
	assert.ErrorIs(t, err, state.ErrCorrupt)
	_, err = db.Get(ctx, "padded")
	assert.ErrorIs(t, err, state.ErrCorrupt, "an integer not written as strconv writes it")
	_, err = db.Get(ctx, "list")
	assert.ErrorIs(t, err, state.ErrCorrupt)
	_, err = db.Lease(ctx, "broken", "b", time.Minute)
	assert.ErrorIs(t, err, state.ErrCorrupt, "a damaged lease hash is never granted from token 1 again")
	err = db.Leases(ctx, true, func(state.LeaseInfo) error { return nil })
	assert.ErrorIs(t, err, state.ErrCorrupt)

	// An untagged value is no integer and equals nothing, and is left as
	// it was; the handle goes on, and Set replaces it.
	raw := rawClient(t, srv)
	_, err = db.Incr(ctx, "untagged")
	assert.ErrorIs(t, err, state.ErrCorrupt)
	require.NoError(t, db.IncrBuffered("untagged", 1))
	assert.ErrorIs(t, db.Flush(ctx), state.ErrCorrupt)
	for _, exp := range []any{7, "7", nil} {
		ok, err := db.CAS(ctx, "untagged", exp, 1)
		require.NoError(t, err)
		assert.False(t, ok, "CAS expecting %#v", exp)
	}
	assert.Equal(t, "7", raw.Get(ctx, "t:k:untagged").Val(), "left as it was")
	require.NoError(t, db.Set(ctx, "untagged", 8))
	v, err := db.Get(ctx, "untagged")
	require.NoError(t, err)
	got, isInt := v.Int()
	assert.True(t, isInt && got == 8, "Set replaced it: %v", v)
}

func TestFlushBuffered(t *testing.T) {
	db, _ := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "bytes", "x"))
	require.NoError(t, db.Set(ctx, "big", int64(math.MaxInt64-1)))
	require.NoError(t, db.Set(ctx, "n", 10, state.TTL(time.Hour)))
	for _, k := range []string{"n", "new", "bytes", "big"} {
		require.NoError(t, db.IncrBuffered(k, 2))
	}
	err := db.Flush(ctx)
	var fe *state.FlushError
	require.ErrorAs(t, err, &fe)
	assert.Len(t, fe.Dropped, 2)
	assert.ErrorIs(t, fe.Dropped["bytes"], state.ErrNotInteger)
	assert.ErrorIs(t, fe.Dropped["big"], state.ErrOverflow)
	assert.Contains(t, fe.Dropped["big"].Error(), "delta 2 dropped")
	v, _ := db.Get(ctx, "n")
	assert.Equal(t, "12", v.String())
	left, _ := db.TTL(ctx, "n")
	assert.Greater(t, left, 59*time.Minute, "a flush keeps the deadline")
	v, _ = db.Get(ctx, "new")
	assert.Equal(t, "2", v.String())
	left, _ = db.TTL(ctx, "new")
	assert.Equal(t, state.NoExpiry, left)
	v, _ = db.Get(ctx, "big")
	n, _ := v.Int()
	assert.EqualValues(t, int64(math.MaxInt64-1), n)
}
