package redisstate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state"
)

// Get returns the live value of key, or ErrNotFound.
//
// Get is the one verb that is not a script: it writes nothing, so it
// needs only to be atomic, and TIME, GET and PEXPIRETIME in one
// MULTI/EXEC are (Redis runs a transaction's commands with no other
// client's in between), for about half what EVALSHA of the same three
// costs. The key is live at TIME's reading while its deadline is after
// it, as in every script (live_get in scripts/lib.lua). A key Redis
// itself found expired inside the transaction had a deadline before
// Redis's reading there, which is not after TIME's, so both agree it is
// gone.
func (s *store) Get(ctx context.Context, key string) (state.Value, error) {
	if s.closed.Load() {
		return state.Value{}, state.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return state.Value{}, fmt.Errorf("statekit: %w", err)
	}
	rkey := s.keyOf(key)
	var v state.Value
	err := s.onOwner(ctx, rkey, func(c *redis.Client, asking bool) error {
		addr := c.Options().Addr
		if !asking {
			var err error
			v, err = s.getOnce(ctx, c, addr, rkey)
			return err
		}
		conn := c.Conn()
		defer conn.Close()
		if err := conn.Do(ctx, "ASKING").Err(); err != nil {
			if redirect(err) {
				return err
			}
			return s.fail(ctx, on(addr, err), reads)
		}
		// ASKING holds through MULTI until its EXEC.
		var err error
		v, err = s.getOnce(ctx, conn, addr, rkey)
		return err
	})
	return v, err
}

// txPipeliner is a client or one of its connections.
type txPipeliner interface {
	TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// getOnce runs Get's transaction once on c, the server at addr that owns
// rkey (or a connection to it). Its redirect errors (a cluster slot that
// moved) are returned as they are.
func (s *store) getOnce(ctx context.Context, c txPipeliner, addr, rkey string) (state.Value, error) {
	old := s.noExpireTime.Load()
	var (
		tm  *redis.TimeCmd
		get *redis.StringCmd
		at  *redis.Cmd
	)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		tm = p.Time(ctx)
		get = p.Get(ctx, rkey)
		if old {
			at = p.Do(ctx, "PTTL", rkey)
		} else {
			at = p.Do(ctx, "PEXPIRETIME", rkey)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		err = queuedErr(err, tm, get, at)
		if !old && unknownCommand(err) {
			s.noExpireTime.Store(true) // before Redis 7: read PTTL
			return s.getOnce(ctx, c, addr, rkey)
		}
		if redirect(err) {
			return state.Value{}, err
		}
		if strings.HasPrefix(err.Error(), "OOM ") {
			// Past maxmemory, Redis refuses every command queued in a
			// MULTI, reads too; a script that only reads it runs.
			return s.getByScript(ctx, rkey)
		}
		return state.Value{}, s.fail(ctx, on(addr, err), reads)
	}
	t, err := tm.Result()
	if err != nil {
		return state.Value{}, s.fail(ctx, on(addr, err), reads)
	}
	now := t.UnixMilli()
	s.clock.observe(now)
	hooks.NoteNow(ctx, now)
	v, err := get.Result()
	if errors.Is(err, redis.Nil) {
		return state.Value{}, state.ErrNotFound
	}
	if err != nil {
		return state.Value{}, s.fail(ctx, on(addr, err), reads)
	}
	ms, err := at.Int64()
	if err != nil {
		return state.Value{}, s.fail(ctx, on(addr, err), reads)
	}
	if ms >= 0 {
		deadline := ms
		if old {
			deadline = now + ms // PTTL counts from Redis's own reading: at most a little early
		}
		if deadline <= now {
			return state.Value{}, state.ErrNotFound
		}
	}
	return decode(v)
}

// getByScript is Get through the read script (scripts/read.lua), for a
// server that refuses Get's transaction: one over its maxmemory.
func (s *store) getByScript(ctx context.Context, rkey string) (state.Value, error) {
	r, err := s.run(ctx, readScript, reads, []string{rkey})
	if err != nil {
		return state.Value{}, err
	}
	v, err1 := r.str(0)
	found, err2 := r.int(1)
	if err := errors.Join(err1, err2); err != nil {
		return state.Value{}, err
	}
	if found == 0 {
		return state.Value{}, state.ErrNotFound
	}
	return decode(v)
}

// queuedErr returns, for a transaction EXEC refused (EXECABORT), the
// error a command got when it was queued, which says why: LOADING from a
// server still reading its AOF, MOVED from a cluster node that no longer
// owns the key, an unknown command. Any other error is returned as it is.
func queuedErr(err error, cmds ...redis.Cmder) error {
	if !strings.HasPrefix(err.Error(), "EXECABORT") {
		return err
	}
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && !errors.Is(cerr, redis.Nil) && !strings.HasPrefix(cerr.Error(), "EXECABORT") {
			return cerr
		}
	}
	return err
}

// unknownCommand reports whether err is the server's answer to a command
// it does not have.
func unknownCommand(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown command")
}
