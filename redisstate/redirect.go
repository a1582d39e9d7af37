package redisstate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// askAddr returns the address an ASK reply names: the master importing
// the key's slot, which serves the key for a command sent after ASKING.
func askAddr(err error) (string, bool) {
	f := strings.Fields(err.Error())
	if len(f) != 3 || f[0] != "ASK" {
		return "", false
	}
	return f[2], true
}

// masterAt returns the client of the master at addr in the store's
// cluster map, or nil when the map has no master there.
func (s *store) masterAt(ctx context.Context, addr string) *redis.Client {
	var (
		mu    sync.Mutex
		found *redis.Client
	)
	_ = s.cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			found = c
			mu.Unlock()
		}
		return nil
	})
	return found
}

// onOwner runs op on the master that owns key and follows the cluster's
// redirects, at most redirectTries sends in all: after MOVED it reloads the
// slot map, pauses and sends op again to the master the map names; after
// ASK (the key's slot is migrating and the key is not on the old master)
// it sends op to the master the reply names (askTarget: one the map does
// not name yet too), with asking true, and op sends ASKING first on the
// same connection. Redis runs nothing it
// redirects, and refuses with TRYAGAIN a command of several keys that an
// importing master does not hold all of, so op runs at most once.
//
// op returns its errors classified (s.fail, naming c's address: on),
// except a redirect reply, which it returns as it is; a redirect still met
// after the last send is returned classified (ErrUnavailable: nothing was
// applied), naming the master that sent it.
func (s *store) onOwner(ctx context.Context, key string, op func(c *redis.Client, asking bool) error) error {
	var target *redis.Client // the master an ASK named, for the next send
	for try := 1; ; try++ {
		c, asking := target, target != nil
		target = nil
		if c == nil {
			var err error
			if c, err = s.client(ctx, key); err != nil {
				return s.fail(ctx, err, reads)
			}
		}
		err := op(c, asking)
		if err == nil || !redirect(err) {
			return err
		}
		err = on(c.Options().Addr, err) // the master that redirected it
		if s.cluster == nil || try >= redirectTries {
			return s.fail(ctx, err, reads)
		}
		if addr, ok := askAddr(err); ok {
			t, err := s.askTarget(ctx, addr)
			if err != nil {
				return err // classified: nothing was sent there
			}
			if target = t; target != nil {
				continue
			}
		}
		s.cluster.ReloadState(ctx)
		if err := s.pause(ctx, time.Duration(try)*10*time.Millisecond); err != nil {
			return fmt.Errorf("statekit: %w", err)
		}
	}
}

// askingScript runs sc on conn after ASKING, which lets a master importing
// the keys' slot serve them: ASKING and EVALSHA in one round trip, and
// ASKING again before EVAL when the master does not have the script
// (ASKING holds for the one command after it).
func askingScript(ctx context.Context, conn *redis.Conn, sc script, keys []string, args ...any) ([]any, error) {
	send := func(eval func(p redis.Pipeliner) *redis.Cmd) ([]any, error) {
		var cmd *redis.Cmd
		_, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "ASKING")
			cmd = eval(p)
			return nil
		})
		if cmd != nil && cmd.Err() != nil {
			return nil, cmd.Err()
		}
		if err != nil {
			return nil, err
		}
		return cmd.Slice()
	}
	res, err := send(func(p redis.Pipeliner) *redis.Cmd { return p.EvalSha(ctx, sc.Hash(), keys, args...) })
	if err != nil && noScript(err) {
		res, err = send(func(p redis.Pipeliner) *redis.Cmd { return sc.Eval(ctx, p, keys, args...) })
	}
	return res, err
}
