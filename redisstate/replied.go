package redisstate

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Naming the master that replied. A command the store sends to one
// master's client (onOwner, a transaction's connection, ForEachMaster)
// marks its error with that master's address (on), so the error names it
// rather than the URL's seed list. A call sent through the cluster client
// itself (a listing's page of keys across masters, a TIME to any master)
// does not know where go-redis sent each command: each master's client
// carries nodeHook, which notes the master of every failed command for a
// call that asks (withReplies).

// repliesKey is the context key of a call's *replies.
type repliesKey struct{}

// replies holds, for one call through the cluster client, the master each
// failed command was last sent to.
type replies struct {
	mu sync.Mutex
	by map[redis.Cmder]string
}

// withReplies returns ctx carrying a *replies for the commands sent with
// it, and that *replies.
func withReplies(ctx context.Context) (context.Context, *replies) {
	r := &replies{}
	return context.WithValue(ctx, repliesKey{}, r), r
}

// note records that cmd failed on the master at addr.
func (r *replies) note(addr string, cmd redis.Cmder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[redis.Cmder]string{}
	}
	r.by[cmd] = addr
}

// on returns err, cmd's error, marked with the master cmd failed on (on),
// or as it is when that is not known (one server, or a command that never
// reached a master's client).
func (r *replies) on(cmd redis.Cmder, err error) error {
	r.mu.Lock()
	addr := r.by[cmd]
	r.mu.Unlock()
	if addr == "" {
		return err
	}
	return on(addr, err)
}

// first returns err, the error a pipeline of cmds returned (its first
// failed command's), marked with the master of the first of cmds that
// failed.
func (r *replies) first(err error, cmds ...redis.Cmder) error {
	for _, c := range cmds {
		if c != nil && c.Err() != nil {
			return r.on(c, err)
		}
	}
	return err
}

// nodeHook is the hook of each master's client in a cluster (its address
// addr): it notes every failed command in the *replies of the call's
// context, when it has one.
type nodeHook struct{ addr string }

// DialHook is go-redis's dial, unchanged.
func (h nodeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook notes a command that failed on this master.
func (h nodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if r, ok := ctx.Value(repliesKey{}).(*replies); ok && err != nil {
			r.note(h.addr, cmd)
		}
		return err
	}
}

// ProcessPipelineHook notes the commands of a pipeline that failed on
// this master.
func (h nodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if r, ok := ctx.Value(repliesKey{}).(*replies); ok {
			for _, c := range cmds {
				if c.Err() != nil {
					r.note(h.addr, c)
				}
			}
		}
		return err
	}
}
