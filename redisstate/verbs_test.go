package redisstate_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTypedValuesAndEncoding: integer 7 and bytes "7" stay apart, and what
// redis-cli sees is the encoding the package doc gives, byte for byte.
func TestTypedValuesAndEncoding(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "int", 7))
	require.NoError(t, db.Set(ctx, "str", "7"))
	require.NoError(t, db.Set(ctx, "bin", []byte{0, 1, 0xff}))
	require.NoError(t, db.Set(ctx, "empty", ""))

	v, err := db.Get(ctx, "int")
	require.NoError(t, err)
	n, ok := v.Int()
	assert.True(t, ok)
	assert.EqualValues(t, 7, n)
	v, err = db.Get(ctx, "str")
	require.NoError(t, err)
	assert.False(t, v.IsInt(), `bytes "7" stays bytes`)
	assert.Equal(t, "7", v.String())
	v, err = db.Get(ctx, "bin")
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 1, 0xff}, v.Bytes())
	v, err = db.Get(ctx, "empty")
	require.NoError(t, err)
	assert.False(t, v.IsInt())
	assert.Empty(t, v.Bytes())

	// As redis-cli sees them.
	assert.Equal(t, ":3", redisCmd(t, srv, "STRLEN", "t:k:int"))   // "i:7"
	assert.Equal(t, ":3", redisCmd(t, srv, "STRLEN", "t:k:str"))   // "b:7"
	assert.Equal(t, ":2", redisCmd(t, srv, "STRLEN", "t:k:empty")) // "b:"
	assert.Equal(t, ":1", redisCmd(t, srv, "EXISTS", "t:k:int"))
	// The documented encoding, byte for byte: prefix + "k:" + key, holding
	// "i:" + decimal or "b:" + the raw bytes, as a verb and a script
	// (Incr) write them; a lease is the hash prefix + "lease:" + name
	// with owner, token and expires (ms, the server's; 0 once released).
	require.NoError(t, db.Set(ctx, "neg", -42))
	_, err = db.Incr(ctx, "counted", state.TTL(time.Hour))
	require.NoError(t, err)
	raw := rawClient(t, srv)
	for key, want := range map[string]string{
		"t:k:int": "i:7", "t:k:str": "b:7", "t:k:bin": "b:\x00\x01\xff", "t:k:empty": "b:",
		"t:k:neg": "i:-42", "t:k:counted": "i:1",
	} {
		got, err := raw.Get(ctx, key).Result()
		require.NoError(t, err, key)
		assert.Equal(t, want, got, key)
	}
	l, err := db.Lease(ctx, "job", "worker-1", time.Hour)
	require.NoError(t, err)
	fields, err := raw.HGetAll(ctx, "t:lease:job").Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"owner": "worker-1", "token": "1",
		"expires": strconv.FormatInt(l.Expires.UnixMilli(), 10)}, fields, "a held lease's hash")
	require.NoError(t, db.Release(ctx, l))
	fields, err = raw.HGetAll(ctx, "t:lease:job").Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"owner": "worker-1", "token": "1", "expires": "0"}, fields, "a released lease's hash")

	_, err = db.Get(ctx, "missing")
	assert.ErrorIs(t, err, state.ErrNotFound)
	_, err = db.Incr(ctx, "str")
	assert.ErrorIs(t, err, state.ErrNotInteger)
	v, _ = db.Get(ctx, "str")
	assert.Equal(t, "7", v.String(), "unchanged after ErrNotInteger")
}

func TestIncrTTLOnlyOnCreate(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	n, err := db.Incr(ctx, "c", state.TTL(time.Hour))
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	pttl := func() int64 {
		out := redisCmd(t, srv, "PTTL", "t:k:c")
		ms, err := strconv.ParseInt(strings.TrimPrefix(out, ":"), 10, 64)
		require.NoError(t, err)
		return ms
	}
	first := pttl()
	assert.Greater(t, first, int64(59*time.Minute/time.Millisecond))
	assert.LessOrEqual(t, first, int64(time.Hour/time.Millisecond))
	n, err = db.IncrBy(ctx, "c", 10, state.TTL(time.Second))
	require.NoError(t, err)
	assert.EqualValues(t, 11, n)
	assert.Greater(t, pttl(), int64(59*time.Minute/time.Millisecond), "the existing key keeps its deadline")

	// Without TTL: no deadline.
	_, err = db.Incr(ctx, "plain")
	require.NoError(t, err)
	left, err := db.TTL(ctx, "plain")
	require.NoError(t, err)
	assert.Equal(t, state.NoExpiry, left)

	// An expired counter starts over, with the new TTL.
	_, err = db.Incr(ctx, "short", state.TTL(50*time.Millisecond))
	require.NoError(t, err)
	eventually(t, "short expires", func() bool {
		_, err := db.Get(ctx, "short")
		return errors.Is(err, state.ErrNotFound)
	})
	n, err = db.Incr(ctx, "short")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
}

func TestIncrOverflowThroughState(t *testing.T) {
	db, _ := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "max", int64(math.MaxInt64)))
	_, err := db.Incr(ctx, "max")
	assert.ErrorIs(t, err, state.ErrOverflow)
	v, _ := db.Get(ctx, "max")
	n, _ := v.Int()
	assert.EqualValues(t, int64(math.MaxInt64), n)
	n, err = db.Decr(ctx, "max")
	require.NoError(t, err)
	assert.EqualValues(t, int64(math.MaxInt64-1), n)

	require.NoError(t, db.Set(ctx, "min", int64(math.MinInt64)))
	_, err = db.Decr(ctx, "min")
	assert.ErrorIs(t, err, state.ErrOverflow)
	n, err = db.IncrBy(ctx, "min", math.MaxInt64)
	require.NoError(t, err)
	assert.EqualValues(t, -1, n)
	_, err = db.DecrBy(ctx, "min", math.MinInt64)
	assert.ErrorIs(t, err, state.ErrOverflow)
}

func TestCASShapes(t *testing.T) {
	db, _ := openDB(t)
	ctx := ctxT(t)
	// nil -> v: create only when absent, without a deadline.
	ok, err := db.CAS(ctx, "k", nil, 1)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = db.CAS(ctx, "k", nil, 2)
	require.NoError(t, err)
	assert.False(t, ok, "present: nil expected does not match")
	left, err := db.TTL(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, state.NoExpiry, left)

	// Type and content must match.
	ok, err = db.CAS(ctx, "k", "1", 3)
	require.NoError(t, err)
	assert.False(t, ok, `int 1 never equals bytes "1"`)
	ok, err = db.CAS(ctx, "k", 1, "one")
	require.NoError(t, err)
	assert.True(t, ok)
	v, _ := db.Get(ctx, "k")
	assert.Equal(t, "one", v.String())
	assert.False(t, v.IsInt())

	// A swap keeps the deadline; with TTL it sets a new one.
	require.NoError(t, db.Set(ctx, "d", "a", state.TTL(time.Hour)))
	ok, err = db.CAS(ctx, "d", "a", "b")
	require.NoError(t, err)
	assert.True(t, ok)
	left, _ = db.TTL(ctx, "d")
	assert.Greater(t, left, 59*time.Minute)
	ok, err = db.CAS(ctx, "d", "b", "c", state.TTL(time.Minute))
	require.NoError(t, err)
	assert.True(t, ok)
	left, _ = db.TTL(ctx, "d")
	assert.LessOrEqual(t, left, time.Minute)
	assert.Greater(t, left, 50*time.Second)

	// v -> nil deletes on a match.
	ok, err = db.CAS(ctx, "d", "x", nil)
	require.NoError(t, err)
	assert.False(t, ok)
	ok, err = db.CAS(ctx, "d", "c", nil)
	require.NoError(t, err)
	assert.True(t, ok)
	_, err = db.Get(ctx, "d")
	assert.ErrorIs(t, err, state.ErrNotFound)

	// nil -> nil: true only when absent.
	ok, err = db.CAS(ctx, "d", nil, nil)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = db.CAS(ctx, "k", nil, nil)
	require.NoError(t, err)
	assert.False(t, ok)

	// nil -> v with TTL: SET NX PX. The TTL read after it may come past
	// the deadline on a loaded machine: then the key is gone, and the
	// server time TTL read at is at or past the CAS's time plus 100 ms.
	var n notes
	nctx := n.ctx(ctx)
	ok, err = db.CAS(nctx, "nx", nil, "v", state.TTL(100*time.Millisecond))
	require.NoError(t, err)
	assert.True(t, ok)
	set := n.one(t, "cas")
	left, err = db.TTL(nctx, "nx")
	read := n.one(t, "ttl")
	if err == nil {
		assert.Equal(t, time.Duration(set+100-read)*time.Millisecond, left, "the deadline is the CAS's time plus 100 ms")
		assert.Positive(t, left)
	} else {
		require.ErrorIs(t, err, state.ErrNotFound)
		assert.GreaterOrEqual(t, read, set+100, "absent only at the CAS's time plus 100 ms")
	}
	eventually(t, "nx expires", func() bool {
		ok, err := db.CAS(ctx, "nx", nil, "again", state.TTL(time.Hour))
		require.NoError(t, err)
		return ok
	})
}

func TestExpireAndTTL(t *testing.T) {
	db, _ := openDB(t)
	ctx := ctxT(t)
	ok, err := db.Expire(ctx, "absent", time.Minute)
	require.NoError(t, err)
	assert.False(t, ok)
	_, err = db.TTL(ctx, "absent")
	assert.ErrorIs(t, err, state.ErrNotFound)

	require.NoError(t, db.Set(ctx, "k", 1))
	left, err := db.TTL(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, state.NoExpiry, left)
	ok, err = db.Expire(ctx, "k", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	left, _ = db.TTL(ctx, "k")
	assert.Greater(t, left, 50*time.Second)
	require.NoError(t, db.Set(ctx, "k", 2))
	left, _ = db.TTL(ctx, "k")
	assert.Equal(t, state.NoExpiry, left, "Set without TTL drops the deadline")

	ok, err = db.Expire(ctx, "k", 0)
	require.NoError(t, err)
	assert.True(t, ok, "ttl 0 deletes a live key and says so")
	ok, err = db.Expire(ctx, "k", -time.Second)
	require.NoError(t, err)
	assert.False(t, ok)
	_, err = db.Get(ctx, "k")
	assert.ErrorIs(t, err, state.ErrNotFound)

	n, err := db.Del(ctx, "a", "a", "b")
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	require.NoError(t, db.Set(ctx, "a", 1))
	require.NoError(t, db.Set(ctx, "b", 1))
	n, err = db.Del(ctx, "a", "a", "b", "c")
	require.NoError(t, err)
	assert.Equal(t, 2, n, "a key named twice counts once")
}

func TestCloseThenVerb(t *testing.T) {
	db, _ := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Close())
	_, err := db.Get(ctx, "k")
	assert.ErrorIs(t, err, state.ErrClosed)
	assert.ErrorIs(t, db.Set(ctx, "k", 1), state.ErrClosed)
	assert.ErrorIs(t, db.Close(), state.ErrClosed)
}
