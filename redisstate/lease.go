package redisstate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state"
)

// optOut says how to lease on a server that may lose writes.
const optOut = "or add allow_unsafe_leases=true to the URL to accept that a restart, or an eviction, may hand a fencing token out twice"

// syncOptOut says how to write without SyncFull's check. The URL's
// allow_unsafe_leases does not lift it: that parameter accepts repeated
// fencing tokens, not lost writes, and the program asked for SyncFull.
const syncOptOut = "or open the store without state.WithSync(state.SyncFull) to accept that a crash, a restart or an eviction may lose an acknowledged write (allow_unsafe_leases=true does not lift this check)"

// durability says what a durability check guards, for its errors.
type durability struct {
	lost    string // what a crash or restart of the server can lose
	evicted string // what an eviction can do
	optOut  string // how to do without the check
}

// needsDurable reports whether a write must first find every server
// durable: every write of a store opened with state.WithSync(SyncFull),
// and a lease grant unless the URL says allow_unsafe_leases=true.
func (s *store) needsDurable(lease bool) bool {
	return s.syncFull || lease && !s.cfg.allowUnsafe
}

// durabilityOf is what the check guards for a lease grant (lease) or
// another write.
func (s *store) durabilityOf(lease bool) durability {
	if !s.syncFull {
		return durability{
			lost:    "a lease grant it acknowledged",
			evicted: "it may evict a lease's hash to make room and then hand its fencing token out again, or grant a held lease twice",
			optOut:  optOut,
		}
	}
	d := durability{
		lost:    "a write it acknowledged, which the store's state.WithSync(state.SyncFull) promises to keep",
		evicted: "it may evict a key or a lease's hash to make room, losing a write it acknowledged",
		optOut:  syncOptOut,
	}
	if lease && !s.cfg.allowUnsafe {
		d.optOut += "; a lease grant then also needs allow_unsafe_leases=true in the URL"
	}
	return d
}

// checkDurable returns an error wrapping ErrNotDurable unless every server
// of the store keeps every acknowledged write (appendonly yes, appendfsync
// always) and never evicts a key to make room (maxmemory 0, or the policy
// noeviction), or the write needs no check (needsDurable: lease says it
// is a lease grant). A passed check is kept until the
// store opens another connection (a server restarted with appendonly no
// loaded no append-only file: every lease hash is gone, and its next grant
// would be token 1 again); a failed one is asked again next time. It
// returns the store's count of connections opened before it checked, for
// recheckDurable.
func (s *store) checkDurable(ctx context.Context, lease bool) (uint64, error) {
	gen := s.conns.Load()
	if !s.needsDurable(lease) || s.durableAt.Load() == gen+1 {
		return gen, nil
	}
	d := s.durabilityOf(lease)
	var mu sync.Mutex
	var problems []error
	check := func(ctx context.Context, c *redis.Client) error {
		found, err := s.durableProblems(ctx, c, d)
		mu.Lock()
		problems = append(problems, found...)
		mu.Unlock()
		return err
	}
	var err error
	if s.cluster != nil {
		err = s.cluster.ForEachMaster(ctx, check)
	} else {
		err = check(ctx, s.single)
	}
	if err != nil {
		return gen, s.fail(ctx, err, reads)
	}
	if len(problems) > 0 {
		return gen, problems[0]
	}
	s.durableAt.Store(gen + 1)
	return gen, nil
}

// durableProblems checks the one server c: it returns an error wrapping
// ErrNotDurable for each way it may lose a write (d says what), or err
// when it could not be asked (naming c's server, unclassified).
func (s *store) durableProblems(ctx context.Context, c *redis.Client, d durability) (problems []error, err error) {
	addr := c.Options().Addr
	cfg := map[string]string{}
	for _, pattern := range []string{"append*", "maxmemory*"} { // one pattern a call before Redis 7
		got, err := c.ConfigGet(ctx, pattern).Result()
		if err != nil {
			var rerr redis.Error
			if errors.As(err, &rerr) && !isNetError(err) && configRefused(s.replyError(addr, err)) {
				return []error{fmt.Errorf("%w: durability of redis at %s cannot be verified: CONFIG GET was refused (%v); check that it has appendonly yes, appendfsync always and maxmemory-policy noeviction (or maxmemory 0), %s",
					state.ErrNotDurable, addr, err, d.optOut)}, nil
			}
			return nil, on(addr, err)
		}
		maps.Copy(cfg, got)
	}
	if cfg["appendonly"] != "yes" || cfg["appendfsync"] != "always" {
		problems = append(problems, fmt.Errorf("%w: redis at %s has appendonly %s and appendfsync %s, so a crash or restart can lose %s; set appendonly yes and appendfsync always on the server, %s",
			state.ErrNotDurable, addr, orNone(cfg["appendonly"]), orNone(cfg["appendfsync"]), d.lost, d.optOut))
	}
	if evicts(cfg["maxmemory"], cfg["maxmemory-policy"]) {
		problems = append(problems, fmt.Errorf("%w: redis at %s has maxmemory %s and maxmemory-policy %s, so %s; set maxmemory-policy noeviction (or maxmemory 0) on the server, %s",
			state.ErrNotDurable, addr, cfg["maxmemory"], orNone(cfg["maxmemory-policy"]), d.evicted, d.optOut))
	}
	return problems, nil
}

// recheckDurable checks again, after a write (lease: a grant) sent under
// the check that returned gen, when the store opened a connection since:
// the write may have gone to a server restarted since the check. outside,
// when not nil, is the master outside the cluster's slot map an ASK sent
// the write to (askdurable.go), which checkDurable does not ask: it is
// checked too.
func (s *store) recheckDurable(ctx context.Context, gen uint64, lease bool, outside *redis.Client) error {
	if !s.needsDurable(lease) || s.conns.Load() == gen {
		return nil
	}
	if _, err := s.checkDurable(ctx, lease); err != nil {
		return err
	}
	if outside != nil {
		return s.checkOutside(ctx, outside, lease)
	}
	return nil
}

// configRefused reports whether err, CONFIG GET's reply error as
// replyError reads it, refuses that one command (unknown or renamed, or
// not allowed to this user: NOPERM), so durability cannot be verified;
// false for a server that refuses every command for now (a password it
// no longer takes, still loading), which is ErrUnavailable as for any
// verb.
func configRefused(err error) bool {
	return !errors.Is(err, state.ErrUnavailable) || strings.Contains(err.Error(), "NOPERM")
}

// evicts reports whether a server with these maxmemory and
// maxmemory-policy settings may delete keys to make room: a memory limit
// (maxmemory not 0) and a policy other than noeviction. A setting it
// cannot read counts as evicting only when the limit is set.
func evicts(maxmemory, policy string) bool {
	if maxmemory == "" || maxmemory == "0" {
		return false
	}
	return policy != "noeviction"
}

func orNone(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// Lease grants name to owner for ttl ms, or returns a *state.LeaseHeldError.
func (s *store) Lease(ctx context.Context, name, owner string, ttl int64) (*state.Lease, error) {
	if s.closed.Load() {
		return nil, state.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("statekit: %w", err)
	}
	gen, err := s.checkDurable(ctx, true)
	if err != nil {
		return nil, err
	}
	wctx, w := withDurableWrite(ctx, true)
	var r reply
	if s.cfg.waitReplicas > 0 {
		r, err = s.leaseAndWait(wctx, name, owner, ttl)
	} else {
		r, err = s.run(wctx, leaseScript, writes, []string{s.leaseOf(name)}, owner, ttl)
	}
	if err != nil {
		return nil, err
	}
	if err := s.recheckDurable(ctx, gen, true, w.outside); err != nil {
		// The script ran on a connection opened after the check: what
		// it answered is not given, and the grant it may have made
		// stands on the server (until a restart that loses it), so its
		// outcome is unknown (the same owner's retry gets the same
		// token). A server that no longer keeps every write is refused
		// from the next call on, by the check before it.
		if errors.Is(err, state.ErrNotDurable) {
			return nil, fmt.Errorf("%w: %w (the server answered the lease over a connection opened since its last check, and may have granted it; its answer is not given)",
				state.ErrOutcomeUnknown, err)
		}
		return nil, fmt.Errorf("%w: the server answered the lease over a connection opened since its durability was last checked, and checking again failed, so its answer is not given: %v",
			state.ErrOutcomeUnknown, err)
	}
	code, err := r.int(0)
	if err != nil {
		return nil, err
	}
	switch code {
	case codeOK:
		token, err1 := r.int(1)
		until, err2 := r.int(2)
		extended, err3 := r.int(3)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, err
		}
		return &state.Lease{Name: name, Owner: owner, Token: token, Expires: time.UnixMilli(until),
			Extended: extended == 1}, nil
	case codeHeld:
		holder, err1 := r.str(1)
		until, err2 := r.int(2)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		return nil, &state.LeaseHeldError{Name: name, Owner: holder, Expires: time.UnixMilli(until),
			Left: msDuration(until - r.now())}
	}
	return nil, damaged("lease", name)
}

// Renew moves l's deadline to now+ttl ms, or returns ErrLeaseLost.
func (s *store) Renew(ctx context.Context, l *state.Lease, ttl int64) error {
	r, err := s.write(ctx, renewScript, []string{s.leaseOf(l.Name)}, l.Owner, strconv.FormatInt(l.Token, 10), ttl)
	if err != nil {
		return err
	}
	if err := leaseAnswer(r, l.Name); err != nil {
		return err
	}
	until, err := r.int(1)
	if err != nil {
		return err
	}
	l.Expires = time.UnixMilli(until)
	return nil
}

// Release ends l, keeping its token, or returns ErrLeaseLost.
func (s *store) Release(ctx context.Context, l *state.Lease) error {
	r, err := s.write(ctx, releaseScript, []string{s.leaseOf(l.Name)}, l.Owner, strconv.FormatInt(l.Token, 10))
	if err != nil {
		return err
	}
	if err := leaseAnswer(r, l.Name); err != nil {
		return err
	}
	l.Expires = time.UnixMilli(r.now())
	return nil
}

// leaseAnswer is the error of a Renew or Release script's answer: nil
// when it moved the lease, ErrLeaseLost when the lease is no longer held,
// ErrCorrupt naming the lease for a damaged hash (left as it was).
func leaseAnswer(r reply, name string) error {
	code, err := r.int(0)
	switch {
	case err != nil:
		return err
	case code == codeOK:
		return nil
	case code == codeDamaged:
		return damaged("lease", name)
	}
	return state.ErrLeaseLost
}

// waitTimeout bounds how long a grant waits for its replicas (WAIT), unless
// the caller's context ends sooner.
const waitTimeout = time.Second

// leaseAndWait runs the lease script and then WAIT, on one connection (WAIT
// counts the replicas that acknowledged that connection's writes), on the
// master that owns the lease, following the cluster's redirects as run
// does (onOwner).
func (s *store) leaseAndWait(ctx context.Context, name, owner string, ttl int64) (reply, error) {
	if s.closed.Load() {
		return nil, state.ErrClosed
	}
	rkey := s.leaseOf(name)
	var r reply
	err := s.onOwner(ctx, rkey, func(c *redis.Client, asking bool) error {
		conn := c.Conn()
		defer conn.Close()
		var (
			res []any
			err error
		)
		if asking {
			res, err = askingScript(ctx, conn, leaseScript, []string{rkey}, owner, ttl)
		} else {
			res, err = leaseScript.Run(ctx, conn, []string{rkey}, owner, ttl).Slice()
		}
		if err != nil {
			if redirect(err) {
				return err
			}
			return s.fail(ctx, on(c.Options().Addr, err), writes)
		}
		r = reply(res)
		s.clock.observe(r.now())
		hooks.NoteNow(ctx, r.now())
		if code, _ := r.int(0); code != codeOK {
			return nil
		}
		if err := s.waitReplicas(ctx, conn, c.Options().Addr); err != nil {
			token, _ := r.str(1)
			return fmt.Errorf("lease granted with token %s on the master, but: %w", token, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// waitReplicas sends WAIT on conn, a connection to the master at addr,
// after a grant, and returns an error wrapping ErrOutcomeUnknown unless
// wait_replicas replicas acknowledged the connection's writes in time.
func (s *store) waitReplicas(ctx context.Context, conn *redis.Conn, addr string) error {
	timeout := waitTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)-10*time.Millisecond)
	}
	ms := max(timeout.Milliseconds(), 1)
	n, err := conn.Do(ctx, "WAIT", s.cfg.waitReplicas, ms).Int64()
	if err != nil {
		return s.fail(ctx, on(addr, err), writes)
	}
	if n < int64(s.cfg.waitReplicas) {
		return fmt.Errorf("%w: only %d of the %d replicas asked for (wait_replicas) of redis at %s acknowledged it within %v: a failover now could hand the token out again (a retry by the same owner is safe)",
			state.ErrOutcomeUnknown, n, s.cfg.waitReplicas, addr, time.Duration(ms)*time.Millisecond)
	}
	return nil
}
