package redisstate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/state"
)

// effect says what a failed command could have done on the server.
type effect bool

const (
	reads  effect = false // it only read: a failure changed nothing
	writes effect = true  // it may write: a failure after sending leaves the outcome unknown
)

// nodeError is the error of one server: in a cluster, of the master a
// command was sent to, which fail names rather than the URL's seed list.
// Its text is the error's own, so the checks that read a reply's text
// (redirect, noScript, ...) read it unchanged.
type nodeError struct {
	addr string // host:port
	err  error
}

func (e *nodeError) Error() string { return e.err.Error() }
func (e *nodeError) Unwrap() error { return e.err }

// on marks err as the reply, or the failure, of the server at addr, for
// fail to name. A nil err stays nil.
func on(addr string, err error) error {
	if err == nil {
		return nil
	}
	return &nodeError{addr: addr, err: err}
}

// addrOf returns the address of the server err came from (on), or, for
// an error no one server is known to have given (a cluster's slot map
// that could not be loaded), the URL's: its server, or a cluster's seeds.
func (s *store) addrOf(err error) string {
	var ne *nodeError
	if errors.As(err, &ne) {
		return ne.addr
	}
	return s.cfg.addr
}

// fail turns a go-redis error into one wrapping this statekit's sentinels:
// ErrUnavailable when the command was not applied (the server could not be
// reached, refused the credentials, is loading or read-only), ErrOutcomeUnknown
// when the connection failed after a command that writes was sent (Close
// cutting it too: ErrClosed as well), the context's error when the
// caller's context ended, ErrCorrupt when a key holds a Redis type
// statekit never writes. The address is named, in a cluster the master's
// that replied or failed when err says which (on); the password never is.
func (s *store) fail(ctx context.Context, err error, eff effect) error {
	if err == nil {
		return nil
	}
	addr := s.addrOf(err)
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("statekit: unexpected nil reply from redis at %s", addr)
	}
	if errors.Is(err, redis.ErrClosed) || s.closed.Load() {
		if eff == writes && isNetError(err) && !notSent(err) {
			// The client was closed under this write after its
			// command was sent, which the server may have run. A
			// handle's Close waits for its verbs in flight, so this is
			// a last guard: it must never read as "never sent".
			return fmt.Errorf("%w: %w: the store was closed while the command was in flight, so it may or may not have been applied (redis at %s: %v)",
				state.ErrOutcomeUnknown, state.ErrClosed, addr, err)
		}
		return state.ErrClosed
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && !isNetError(err) {
		return s.replyError(addr, err)
	}
	if ctxErr := ctxDone(ctx); ctxErr != nil {
		if eff == writes && !notSent(err) {
			return fmt.Errorf("%w: %w: the command may or may not have been applied (redis at %s: %v)",
				state.ErrOutcomeUnknown, ctxErr, addr, err)
		}
		return fmt.Errorf("statekit: %w (redis at %s: %v)", ctxErr, addr, err)
	}
	if eff == writes && !notSent(err) {
		return fmt.Errorf("%w: the connection to redis at %s failed after the command was sent, so it may or may not have been applied (a script runs whole or not at all): %w",
			state.ErrOutcomeUnknown, addr, err)
	}
	return fmt.Errorf("%w: redis at %s: %w", state.ErrUnavailable, addr, err)
}

// replyError classifies an error reply of the server at addr. A cluster
// redirect (MOVED, ASK) or TRYAGAIN means the node ran nothing:
// ErrUnavailable.
func (s *store) replyError(addr string, err error) error {
	msg := err.Error()
	word, _, _ := strings.Cut(msg, " ")
	if word == "EXECABORT" {
		// A transaction Redis 7 discarded at EXEC names the refusal
		// ("because of: BUSY ..."): an EXEC refused with nothing queued
		// (an attempt's watch check) has no queued command's error to
		// show it, as queuedErr finds for one that had.
		if _, cause, ok := strings.Cut(msg, "because of: "); ok {
			word, _, _ = strings.Cut(cause, " ")
		}
	}
	switch word {
	case "MOVED", "ASK":
		// A redirect the store kept meeting (onOwner follows them a
		// few times): the node did not run the command.
		slot, to := "?", "?"
		if f := strings.Fields(msg); len(f) == 3 {
			slot, to = f[1], f[2]
		}
		if s.cluster == nil {
			return fmt.Errorf("%w: redis at %s is a cluster node and did not run the command (slot %s is served by %s): open a cluster with a redis+cluster:// URL; nothing was applied: %w",
				state.ErrUnavailable, addr, slot, to, err)
		}
		return fmt.Errorf("%w: redis at %s did not run the command: cluster slot %s is moving to %s and kept redirecting it, nothing was applied: %w",
			state.ErrUnavailable, addr, slot, to, err)
	case "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "NOAUTH", "WRONGPASS", "NOPERM", "OOM", "MISCONF", "NOREPLICAS":
		return fmt.Errorf("%w: redis at %s refused the command, nothing was applied: %w", state.ErrUnavailable, addr, err)
	case "BUSY":
		return fmt.Errorf("%w: redis at %s is running another script: %w", state.ErrBusy, addr, err)
	case "WRONGTYPE":
		return fmt.Errorf("%w: a key of the store holds a Redis type statekit never writes: %w", state.ErrCorrupt, err)
	case "CROSSSLOT":
		return fmt.Errorf("%w: %w", state.ErrInvalidArgument, err)
	}
	if strings.Contains(msg, "DB index is out of range") {
		return fmt.Errorf("%w: redis at %s: %w", state.ErrInvalidArgument, addr, err)
	}
	if strings.Contains(msg, "invalid password") || strings.Contains(msg, "invalid username-password") || strings.HasPrefix(msg, "ERR AUTH") {
		return fmt.Errorf("%w: redis at %s refused the credentials: %w", state.ErrUnavailable, addr, err)
	}
	return fmt.Errorf("statekit: redis at %s: %w", addr, err)
}

// ctxDone returns the context's error, or DeadlineExceeded once its
// deadline has passed even if its timer has not fired yet (go-redis sets
// the connection's deadline to the context's, so the read can time out a
// moment before the context says so).
func ctxDone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// notSent reports whether err means the command never reached the server:
// the connection could not be made or taken from the pool, or the server
// refused it.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, errClosedBeforeSend) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, redis.ErrPoolExhausted)
}

// isNetError reports whether err is the connection's, not a reply.
func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// isConflict reports whether err is EXEC's nil reply: a watched key changed.
func isConflict(err error) bool { return errors.Is(err, redis.TxFailedErr) }

// redirect reports whether err is a cluster redirect (MOVED or ASK): the
// command was not run, and may be sent again, to the master ASK names or
// once the slot map is reloaded (onOwner).
func redirect(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// mayHaveRun reports whether a script that failed with err may have
// written: false only for the errors that say it never ran (the server
// could not be reached, refused it or redirected it (MOVED, ASK,
// TRYAGAIN: ErrUnavailable), the store was closed, SyncFull's
// durability check refused the server before it was sent, the context
// ended before it was sent, another script was running, a cross-slot
// call), true for a lost reply (ErrOutcomeUnknown) and for anything else.
func mayHaveRun(err error) bool {
	switch {
	case errors.Is(err, state.ErrOutcomeUnknown):
		return true
	case errors.Is(err, state.ErrUnavailable), errors.Is(err, state.ErrClosed), errors.Is(err, state.ErrNotDurable),
		errors.Is(err, state.ErrBusy), errors.Is(err, state.ErrInvalidArgument),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return true
}
