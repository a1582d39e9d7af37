package redisstate

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// killAfterScript is a go-redis hook that, once armed, SIGKILLs the server
// right after a script's answer arrives: what the store does next meets a
// dead server.
type killAfterScript struct {
	armed atomic.Bool
	kill  func()
}

func (h *killAfterScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *killAfterScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); err == nil && (name == "evalsha" || name == "eval") && h.armed.CompareAndSwap(true, false) {
			h.kill()
		}
		return err
	}
}

func (h *killAfterScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLeaseAnsweredOverANewConnectionIsUnknownWhenTheRecheckFails: a grant
// answered over a connection the store opened after its last durability
// check came perhaps from a restarted server, so Lease checks again before
// it gives the answer. When that check cannot be made (the server died
// right after the grant), the grant is neither given nor denied:
// ErrOutcomeUnknown, saying why. The grant did happen on a durable server,
// and the same owner's retry after the restart gets its token.
func TestLeaseAnsweredOverANewConnectionIsUnknownWhenTheRecheckFails(t *testing.T) {
	s, srv := openStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.Lease(ctx, "x", "a", time.Minute.Milliseconds())
	require.NoError(t, err, "the check passes, and is remembered")

	h := &killAfterScript{kill: srv.Kill}
	s.single.AddHook(h)
	srv.Restart()
	h.armed.Store(true)
	var l *state.Lease
	for {
		l, err = s.Lease(ctx, "y", "b", time.Minute.Milliseconds())
		if !errors.Is(err, state.ErrUnavailable) || ctx.Err() != nil {
			break // not a pooled connection to the server before the restart
		}
	}
	require.False(t, h.armed.Load(), "the grant ran, and the server was killed after it")
	require.ErrorIs(t, err, state.ErrOutcomeUnknown, "granted %+v", l)
	assert.Contains(t, err.Error(), "checking again failed, so its answer is not given")
	assert.Nil(t, l)

	srv.Restart()
	for {
		l, err = s.Lease(ctx, "y", "b", time.Minute.Milliseconds())
		if !errors.Is(err, state.ErrUnavailable) && !errors.Is(err, state.ErrOutcomeUnknown) || ctx.Err() != nil {
			break
		}
	}
	require.NoError(t, err)
	assert.EqualValues(t, 1, l.Token, "the same owner's retry gets the grant the lost answer carried")
	_, err = s.Lease(ctx, "y", "c", time.Minute.Milliseconds())
	var held *state.LeaseHeldError
	require.ErrorAs(t, err, &held, "the unknown grant held the lease")
	assert.Equal(t, "b", held.Owner)
}
