package redisstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/statekit/statekit/state"
)

// write runs the script of a write verb (every one but Lease, which checks
// for itself) on the server that owns keys[0]. On a store opened with
// state.WithSync(state.SyncFull), every server must keep every
// acknowledged write first (checkDurable), or nothing is sent; and when
// the store opened a connection since that check, the script may have
// run on a server restarted since, so it is checked again before the
// answer is given (recheckDurable). A master outside the cluster's slot
// map that an ASK sends it to is checked on its own (askdurable.go).
// Without SyncFull it is run.
func (s *store) write(ctx context.Context, sc script, keys []string, args ...any) (reply, error) {
	if s.closed.Load() {
		return nil, state.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("statekit: %w", err)
	}
	gen, err := s.checkDurable(ctx, false)
	if err != nil {
		return nil, err
	}
	wctx, w := withDurableWrite(ctx, false)
	r, err := s.run(wctx, sc, writes, keys, args...)
	if err != nil {
		return nil, err
	}
	if err := s.recheckDurable(ctx, gen, false, w.outside); err != nil {
		return nil, unkept(err)
	}
	return r, nil
}

// unkept is the error of a write the server applied over a connection
// opened since the last durability check, when the check made again
// after it failed: the write stands on the server, perhaps only until its
// next crash, so its outcome is unknown (ErrOutcomeUnknown, and
// ErrNotDurable when the server does not keep every write), as a lost
// answer's would be: a retry of an increment could count it twice.
func unkept(err error) error {
	if errors.Is(err, state.ErrNotDurable) {
		return fmt.Errorf("%w: %w (the write was applied over a connection opened since the last check, so on a server that may lose it; its answer is not given)",
			state.ErrOutcomeUnknown, err)
	}
	return fmt.Errorf("%w: the server applied the write over a connection opened since its durability was last checked, and checking again failed, so its answer is not given: %v",
		state.ErrOutcomeUnknown, err)
}
