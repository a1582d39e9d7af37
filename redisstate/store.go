package redisstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/internal/backend"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state"
)

func init() {
	for _, scheme := range []string{"redis", "rediss", "redis+cluster"} {
		backend.Register(scheme, func(url string, o backend.Options) (any, error) { return open(url, o) })
	}
}

// store is a statekit store on a Redis server or cluster: what state.Open
// returns a *state.DB around for a redis://, rediss:// or redis+cluster://
// URL. It implements state's remote interface (state/remote.go).
type store struct {
	cfg     *config
	single  *redis.Client        // redis://, rediss://
	cluster *redis.ClusterClient // redis+cluster://
	uc      redis.UniversalClient

	closed atomic.Bool
	clock  clock
	// conns counts the connections the store opened (OnConnect): a
	// server restarted, perhaps with another configuration, is reached
	// by new ones only. durableAt is conns+1 as it was when the
	// durability check last passed, 0 for never (lease.go).
	conns     atomic.Uint64
	durableAt atomic.Uint64

	noExpireTime atomic.Bool // the server has no PEXPIRETIME (before Redis 7)

	// syncFull: opened with state.WithSync(state.SyncFull), so every
	// write checks the server's durability first (syncfull.go).
	syncFull bool

	// pause waits between two attempts of an Update, or of a command a
	// cluster redirected: sleep, but in tests that count the pauses or
	// move a slot meanwhile.
	pause func(ctx context.Context, d time.Duration) error

	// migrationWait bounds how long an Update waits for its cluster
	// slot to finish moving between masters, and a listing for the slots
	// that moved while it read them to hold still: the handle's busy
	// timeout (backend.Options.BusyTimeout; tests change it).
	migrationWait time.Duration

	closeOnce sync.Once
	closeErr  error

	nodes nodes // a cluster's masters' clients (nodes.go)

	// scanning, when set (by tests), is called as a listing starts to
	// read the keys of the cluster master at addr (its SCAN, or one
	// slot's keys: reshard.go), and what it returns once that read (or
	// the slot's reads) ended: a test moves a slot between two reads.
	scanning func(addr string) (done func())
}

// open opens the store a URL names and checks that its server answers.
func open(raw string, o backend.Options) (*store, error) {
	cfg, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	s := &store{cfg: cfg, pause: sleep, syncFull: o.SyncFull, migrationWait: o.BusyTimeout}
	counted := func(context.Context, *redis.Conn) error { s.conns.Add(1); return nil }
	if cfg.cluster != nil {
		cfg.cluster.OnConnect = counted
		cfg.cluster.Dialer = checkingDialer(redis.NewDialer(&redis.Options{DialTimeout: cfg.cluster.DialTimeout, TLSConfig: cfg.cluster.TLSConfig}))
		cfg.cluster.NewClient = s.nodes.newClient // errors name the master that gave them (replied.go)
		s.cluster = redis.NewClusterClient(cfg.cluster)
		s.uc = s.cluster
	} else {
		cfg.single.OnConnect = counted
		cfg.single.Dialer = checkingDialer(redis.NewDialer(cfg.single))
		s.single = redis.NewClient(cfg.single)
		s.uc = s.single
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.dialTimeout)
	defer cancel()
	if err := s.ping(ctx); err != nil {
		_ = s.uc.Close()
		return nil, err
	}
	return s, nil
}

// ping checks that every server answers (with the credentials, and the
// database selected) and reads the server time for Now.
func (s *store) ping(ctx context.Context) error {
	fail := func(err error) error {
		err = s.fail(ctx, err, reads)
		if !isInvalid(err) && !isUnavailable(err) {
			err = fmt.Errorf("%w: %w", state.ErrUnavailable, err)
		}
		return err
	}
	if s.cluster != nil {
		err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return on(c.Options().Addr, c.Ping(ctx).Err())
		})
		if err != nil {
			return fail(err)
		}
	} else if err := s.single.Ping(ctx).Err(); err != nil {
		return fail(err)
	} else if info, err := s.single.Info(ctx, "cluster").Result(); err == nil && strings.Contains(info, "cluster_enabled:1") {
		// Every key of another master's slot would fail with MOVED. (A
		// server that refuses INFO is taken as it is.)
		return fmt.Errorf("%w: redis at %s is a node of a cluster (cluster_enabled:1): open the cluster with a redis+cluster:// URL, which follows its slots",
			state.ErrInvalidArgument, s.cfg.single.Addr)
	}
	t, err := s.uc.Time(ctx).Result()
	if err != nil {
		return fail(err)
	}
	s.clock.baseMs, s.clock.at = t.UnixMilli(), time.Now()
	return nil
}

// client returns the client that serves key: the server, or the master
// that owns key's slot in a cluster.
func (s *store) client(ctx context.Context, key string) (*redis.Client, error) {
	if s.single != nil {
		return s.single, nil
	}
	return s.cluster.MasterForKey(ctx, key)
}

// redirectTries bounds how often a command is sent in all while cluster
// redirects (MOVED, ASK) send it elsewhere (onOwner).
const redirectTries = 8

// run runs a script on the server that owns keys[0], following the
// cluster's redirects (onOwner), and returns its reply with the server
// time it used noted in the store's clock.
func (s *store) run(ctx context.Context, sc script, eff effect, keys []string, args ...any) (reply, error) {
	if s.closed.Load() {
		return nil, state.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("statekit: %w", err)
	}
	var r reply
	err := s.onOwner(ctx, keys[0], func(c *redis.Client, asking bool) error {
		var (
			res []any
			err error
		)
		if asking {
			conn := c.Conn()
			res, err = askingScript(ctx, conn, sc, keys, args...)
			_ = conn.Close()
		} else {
			res, err = sc.Run(ctx, c, keys, args...).Slice()
		}
		if err != nil {
			if redirect(err) {
				return err
			}
			return s.fail(ctx, on(c.Options().Addr, err), eff)
		}
		r = reply(res)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.clock.observe(r.now())
	hooks.NoteNow(ctx, r.now())
	return r, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// damaged is the error for a script that found a stored value it cannot use.
func damaged(what, name string) error {
	return fmt.Errorf("%w: the %s %q holds a value without a valid statekit encoding", state.ErrCorrupt, what, name)
}

// Set stores v at key, with the deadline now+ttl (ms) or none for ttl 0.
func (s *store) Set(ctx context.Context, key string, v state.Value, ttl int64) error {
	_, err := s.write(ctx, setScript, []string{s.keyOf(key)}, encode(v), ttl)
	return err
}

// Del deletes keys and returns how many were live. In a cluster, keys of
// different slots are deleted by one script per slot, not atomically: when
// a slot's script fails after another slot's ran, the error wraps
// state.ErrOutcomeUnknown (never a bare ErrUnavailable, which would say
// nothing was deleted) and names the keys deleted and the keys perhaps
// not; the count returned is of the slots deleted.
func (s *store) Del(ctx context.Context, keys []string) (int, error) {
	total := 0
	var done []string // keys of the slots whose script ran
	groups := s.bySlot(dedup(keys))
	for i, group := range groups {
		full := make([]string, len(group))
		for i, k := range group {
			full[i] = s.keyOf(k)
		}
		r, err := s.write(ctx, delScript, full)
		if err == nil {
			var n int64
			if n, err = r.int(0); err == nil {
				total += int(n)
				done = append(done, group...)
				continue
			}
		}
		if len(done) == 0 {
			return total, err
		}
		var rest []string
		for _, g := range groups[i:] {
			rest = append(rest, g...)
		}
		if errors.Is(err, state.ErrOutcomeUnknown) {
			return total, fmt.Errorf("statekit: Del deleted %q (other slots) but not, or not surely, %q: %w", done, rest, err)
		}
		return total, fmt.Errorf("%w: Del deleted %q (other slots) but not %q: %w", state.ErrOutcomeUnknown, done, rest, err)
	}
	return total, nil
}

// dedup returns keys without repeats, in first-seen order.
func dedup(keys []string) []string {
	seen := make(map[string]bool, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// IncrBy adds delta to the integer at key with IncrBy's rules.
func (s *store) IncrBy(ctx context.Context, key string, delta, ttl int64) (int64, error) {
	r, err := s.write(ctx, incrScript, []string{s.keyOf(key)}, strconv.FormatInt(delta, 10), ttl)
	if err != nil {
		return 0, err
	}
	code, err := r.int(0)
	if err != nil {
		return 0, err
	}
	switch code {
	case codeOK:
		return r.int(1)
	case codeNotInt:
		return 0, state.ErrNotInteger
	case codeOverflow:
		return 0, state.ErrOverflow
	}
	return 0, damaged("key", key)
}

// CAS swaps key's value from exp (nil: absent) to nv (nil: delete).
func (s *store) CAS(ctx context.Context, key string, exp, nv *state.Value, ttl int64) (bool, error) {
	args := []any{"0", "", "0", "", ttl}
	if exp != nil {
		args[0], args[1] = "1", encode(*exp)
	}
	if nv != nil {
		args[2], args[3] = "1", encode(*nv)
	}
	r, err := s.write(ctx, casScript, []string{s.keyOf(key)}, args...)
	if err != nil {
		return false, err
	}
	n, err := r.int(0)
	return n == 1, err
}

// Expire sets key's deadline to now+ttl (ms), or deletes it for ttl <= 0.
func (s *store) Expire(ctx context.Context, key string, ttl int64) (bool, error) {
	r, err := s.write(ctx, expireScript, []string{s.keyOf(key)}, ttl)
	if err != nil {
		return false, err
	}
	n, err := r.int(0)
	return n == 1, err
}

// TTL returns the time key has left, state.NoExpiry, or ErrNotFound.
func (s *store) TTL(ctx context.Context, key string) (time.Duration, error) {
	r, err := s.run(ctx, ttlScript, reads, []string{s.keyOf(key)})
	if err != nil {
		return 0, err
	}
	ms, err := r.int(0)
	switch {
	case err != nil:
		return 0, err
	case ms == -2:
		return 0, state.ErrNotFound
	case ms == -1:
		return state.NoExpiry, nil
	}
	return msDuration(ms), nil
}

// Flush adds deltas to the integers at keys, one script per cluster slot.
// ran is false only when nothing was written: the first script failed
// with an error that means it was never run (ErrUnavailable: not sent or
// refused, the context ended before it was sent, ...). A lost reply
// (ErrOutcomeUnknown), or any error after a script may have run, says
// ran: its deltas must not be kept for another flush, which could add
// them twice. On a cluster, once a script has run or may have, the flush
// answers key by key and sends every slot's script: one that fails with
// an error that means it never ran names its keys in kept, with that
// error (none of their deltas was applied, so the next flush may send
// them); one that may have run names its keys in dropped. The server time
// of each script is noted (hooks.NoteNow).
func (s *store) Flush(ctx context.Context, keys []string, deltas map[string]int64) (dropped, kept map[string]error, ran bool, err error) {
	dropped, kept = map[string]error{}, map[string]error{}
	groups := s.bySlot(keys)
	for _, group := range groups {
		full := make([]string, len(group))
		args := make([]any, len(group))
		for i, k := range group {
			full[i], args[i] = s.keyOf(k), strconv.FormatInt(deltas[k], 10)
		}
		r, err := s.write(ctx, flushScript, full, args...)
		if err != nil {
			if !ran && (!mayHaveRun(err) || len(groups) == 1) {
				return nil, nil, mayHaveRun(err), err
			}
			// The flush answers key by key: these keys are kept when
			// their script never ran, else dropped, so none is applied
			// twice; the other slots' scripts are sent all the same.
			ran = ran || mayHaveRun(err)
			for _, k := range group {
				if mayHaveRun(err) {
					dropped[k] = fmt.Errorf("delta %d dropped: %w", deltas[k], err)
				} else {
					kept[k] = fmt.Errorf("delta %d not applied: %w", deltas[k], err)
				}
			}
			continue
		}
		ran = true
		for i, k := range group {
			code, err := r.int(i)
			if err != nil {
				return dropped, kept, ran, err
			}
			switch code {
			case codeNotInt:
				dropped[k] = fmt.Errorf("delta %d dropped: %w", deltas[k], state.ErrNotInteger)
			case codeOverflow:
				dropped[k] = fmt.Errorf("delta %d dropped: %w", deltas[k], state.ErrOverflow)
			case codeDamaged:
				dropped[k] = fmt.Errorf("delta %d dropped: %w", deltas[k], damaged("key", k))
			}
		}
	}
	return dropped, kept, ran, nil
}

// Sweep returns 0: Redis deletes expired keys itself. It returns the
// context's error when ctx has ended, as the file engine's Sweep does.
func (s *store) Sweep(ctx context.Context) (int, error) {
	if s.closed.Load() {
		return 0, state.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("statekit: %w", err)
	}
	return 0, nil
}

// Now returns the server's time as the store estimates it.
func (s *store) Now() time.Time { return time.UnixMilli(s.clock.nowMs()) }

// Close closes the client. A second Close returns nil.
func (s *store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.closeErr = s.uc.Close()
		s.nodes.close()
	})
	return s.closeErr
}
