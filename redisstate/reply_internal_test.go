package redisstate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryScriptReplyEndsWithItsTime runs each script and checks that
// reply.now, its last element, is the server time it ran at (between a
// TIME before and one after), for every reply layout: flush's codes come
// first, its time last.
func TestEveryScriptReplyEndsWithItsTime(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	k, l := s.keyOf("k"), s.leaseOf("L")
	require.NoError(t, s.Set(ctx, "bytes", state.BytesValue([]byte("x")), 0))
	cases := []struct {
		sc   script
		keys []string
		args []any
		want []any // the elements before the time, when fixed
	}{
		{setScript, []string{k}, []any{"i:1", 0}, []any{}},
		{incrScript, []string{k}, []any{"2", 0}, []any{int64(codeOK), "3"}},
		{casScript, []string{k}, []any{"1", "i:3", "1", "i:4", 0}, []any{int64(1)}},
		{expireScript, []string{k}, []any{60000}, []any{int64(1)}},
		{ttlScript, []string{k}, nil, nil},
		{readScript, []string{k}, nil, nil},
		{flushScript, []string{k, s.keyOf("bytes"), s.keyOf("new")}, []any{"1", "1", "7"},
			[]any{int64(codeOK), int64(codeNotInt), int64(codeOK)}},
		{delScript, []string{k, s.keyOf("none")}, nil, []any{int64(1)}},
		{leaseScript, []string{l}, []any{"me", 60000}, nil},
		{renewScript, []string{l}, []any{"me", "1", 60000}, nil},
		{releaseScript, []string{l}, []any{"me", "1"}, []any{int64(codeOK)}},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.sc.name] = true
		before, err := s.single.Time(ctx).Result()
		require.NoError(t, err)
		res, err := c.sc.Run(ctx, s.single, c.keys, c.args...).Slice()
		require.NoError(t, err, c.sc.name)
		after, err := s.single.Time(ctx).Result()
		require.NoError(t, err)
		r := reply(res)
		assert.GreaterOrEqual(t, r.now(), before.UnixMilli(), "%s: %v", c.sc.name, res)
		assert.LessOrEqual(t, r.now(), after.UnixMilli(), "%s: %v", c.sc.name, res)
		if c.want != nil {
			assert.Equal(t, c.want, []any(r[:len(r)-1]), c.sc.name)
		}
	}
	for _, sc := range []script{setScript, delScript, incrScript, casScript, expireScript, ttlScript,
		readScript, flushScript, leaseScript, renewScript, releaseScript} {
		assert.True(t, seen[sc.name], "%s is checked", sc.name)
	}
}

// TestFlushLeavesNothingHalfDone: a key of another Redis type among a
// flush's keys is reported as damaged, and the other keys are written;
// Del refuses such a key before it deletes anything.
func TestFlushLeavesNothingHalfDone(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	require.NoError(t, s.single.HSet(ctx, s.keyOf("hash"), "f", "v").Err())
	dropped, kept, ran, err := s.Flush(ctx, []string{"a", "hash", "z"}, map[string]int64{"a": 1, "hash": 2, "z": 3})
	require.NoError(t, err)
	assert.True(t, ran)
	assert.Empty(t, kept)
	require.Len(t, dropped, 1)
	assert.ErrorIs(t, dropped["hash"], state.ErrCorrupt)
	for k, want := range map[string]int64{"a": 1, "z": 3} {
		v, err := s.Get(ctx, k)
		require.NoError(t, err)
		n, _ := v.Int()
		assert.Equal(t, want, n, k)
	}

	_, err = s.Del(ctx, []string{"a", "hash", "z"})
	require.ErrorIs(t, err, state.ErrCorrupt)
	for _, k := range []string{"a", "z"} {
		_, err := s.Get(ctx, k)
		assert.NoError(t, err, "%s was not deleted by a Del that failed", k)
	}
}

// TestFlushSaysItRanWhenItsReplyIsLost: a flush whose reply is lost
// (the server stopped after it was sent, and the context ended) reports
// ErrOutcomeUnknown with ran true, so its deltas are never flushed again;
// one the server never got (it is gone) reports ErrUnavailable with ran
// false.
func TestFlushSaysItRanWhenItsReplyIsLost(t *testing.T) {
	s, srv := openStore(t)
	_, _, _, err := s.Flush(context.Background(), []string{"n"}, map[string]int64{"n": 1})
	require.NoError(t, err) // a connection in the pool

	srv.Pause() // SIGSTOP: the command is sent, no reply comes
	// The deadline must outlast sending the command, which a loaded
	// machine may delay: 2 s, a cap, not a speed target (the reply never
	// comes, so the Flush waits all of it).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, _, ran, err := s.Flush(ctx, []string{"n"}, map[string]int64{"n": 1})
	cancel()
	srv.Resume()
	require.ErrorIs(t, err, state.ErrOutcomeUnknown)
	assert.True(t, ran, "a lost reply may have been applied: %v", err)

	srv.Kill()
	_, _, ran, err = s.Flush(context.Background(), []string{"n"}, map[string]int64{"n": 1})
	require.Error(t, err)
	switch {
	case errors.Is(err, state.ErrUnavailable):
		assert.False(t, ran, "nothing was sent: %v", err)
	case errors.Is(err, state.ErrOutcomeUnknown):
		// The pooled connection took the command before it saw the
		// server gone: it may have been applied, as far as the store
		// can tell.
		assert.True(t, ran, "%v", err)
	default:
		t.Fatalf("flush on a killed server: %v", err)
	}
}

// TestMayHaveRun: which classified errors say a script may have run.
func TestMayHaveRun(t *testing.T) {
	s := &store{cfg: &config{addr: "127.0.0.1:1"}}
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{s.fail(ctx, io.EOF, writes), true},
		{s.fail(ctx, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, writes), true},
		{s.fail(done, &net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")}, writes), true},
		{s.fail(ctx, refused, writes), false},
		{s.fail(done, refused, writes), false},
		{s.fail(ctx, redis.ErrPoolTimeout, writes), false},
		{s.fail(ctx, redis.ErrClosed, writes), false},
		{s.fail(ctx, fakeReply("LOADING Redis is loading the dataset in memory"), writes), false},
		{s.fail(ctx, fakeReply("BUSY Redis is busy running a script"), writes), false},
		{s.fail(ctx, fakeReply("CROSSSLOT Keys in request don't hash to the same slot"), writes), false},
		// A cluster redirect that reached the caller: the node ran
		// nothing (before, unclassified, it read as "may have run").
		{s.fail(ctx, fakeReply("MOVED 3999 127.0.0.1:6381"), writes), false},
		{s.fail(ctx, fakeReply("ASK 3999 127.0.0.1:6381"), writes), false},
		{s.fail(ctx, fakeReply("TRYAGAIN Multiple keys request during rehashing of slot"), writes), false},
		{s.fail(ctx, fakeReply("ERR Error running script: boom"), writes), true},
		{fmt.Errorf("statekit: %w", context.Canceled), false},
	} {
		assert.Equal(t, c.want, mayHaveRun(c.err), "%v", c.err)
	}
}

// fakeReply is an error reply of the server.
type fakeReply string

func (e fakeReply) Error() string { return string(e) }
func (fakeReply) RedisError()     {}
