package redisstate

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommandOnAConnectionTheServerClosedIsNotSent: a connection the
// store holds across a restart of the server (go-redis hands a dedicated
// connection back without looking at it) is gone when the next command
// is written. The command is not written: the error is errClosedBeforeSend,
// which the store reports as ErrUnavailable (nothing applied), never as
// ErrOutcomeUnknown; the next verb runs on another connection.
func TestCommandOnAConnectionTheServerClosedIsNotSent(t *testing.T) {
	s, srv := openStore(t)
	ctx := context.Background()
	conn := s.single.Conn()
	defer conn.Close()
	require.NoError(t, conn.Set(ctx, s.keyOf("k"), "1", 0).Err())
	require.NoError(t, srv.Relaunch())

	err := conn.Set(ctx, s.keyOf("k"), "2", 0).Err()
	require.ErrorIs(t, err, errClosedBeforeSend, "a write on the closed connection")
	failed := s.fail(ctx, err, writes)
	assert.ErrorIs(t, failed, state.ErrUnavailable)
	assert.NotErrorIs(t, failed, state.ErrOutcomeUnknown)
	assert.False(t, mayHaveRun(failed))

	// The next verb takes another connection: it succeeds on the restarted server.
	require.NoError(t, s.Set(ctx, "k", state.IntValue(3), 0))
	v, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, state.IntValue(3), v)
}

// TestPeerCheckedConnWritesToALiveServer: the check lets a write through
// on a connection whose other end is still there, and the bytes arrive;
// on one whose other end closed, it writes nothing.
func TestPeerCheckedConnWritesToALiveServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var d net.Dialer
	dial := checkingDialer(d.DialContext)

	c, err := dial(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	pc, ok := c.(*peerCheckedConn)
	require.True(t, ok, "a plain TCP connection is checked")
	server := <-accepted
	pc.last.Store(-1 << 62) // unused for long: the next write looks first
	_, err = c.Write([]byte("PING\r\n"))
	require.NoError(t, err)
	buf := make([]byte, 6)
	_, err = io.ReadFull(server, buf)
	require.NoError(t, err)
	assert.Equal(t, "PING\r\n", string(buf))

	require.NoError(t, server.Close())
	// The end of file reaches the socket when the kernel delivers it:
	// read it as go-redis's idle check would, without consuming.
	for i := 0; peerClosed(pc.sc) == nil; i++ {
		require.Less(t, i, 1_000_000, "the server's close never reached the socket")
	}
	pc.last.Store(-1 << 62)
	n, err := c.Write([]byte("PING\r\n"))
	assert.Zero(t, n)
	assert.ErrorIs(t, err, errClosedBeforeSend)
	assert.Contains(t, err.Error(), "(EOF)", "the cause is named")
	assert.False(t, errors.Is(err, io.EOF), "not an EOF after a write: nothing was written")
}
