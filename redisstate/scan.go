package redisstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/internal/redisurl"
	"github.com/statekit/statekit/state"
)

// scanPage is how many keys Scan, Leases, Stats and Check read per round
// trip once they have listed them.
const scanPage = 256

// list returns every Redis key that starts with prefix, on the server or
// on every master of a cluster (listCluster), without repeats, sorted by
// bytes.
func (s *store) list(ctx context.Context, prefix string) ([]string, error) {
	if s.closed.Load() {
		return nil, state.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("statekit: %w", err)
	}
	match := redisurl.GlobEscape(prefix) + "*"
	if s.cluster != nil {
		return s.listCluster(ctx, prefix, match)
	}
	seen := map[string]bool{}
	var cursor uint64
	for {
		keys, next, err := s.single.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return nil, s.fail(ctx, err, reads)
		}
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				seen[k] = true
			}
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}

// serverNow reads the server's TIME (in a cluster, any master's).
func (s *store) serverNow(ctx context.Context) (int64, error) {
	ctx, rep := withReplies(ctx)
	cmd := s.uc.Time(ctx)
	t, err := cmd.Result()
	if err != nil {
		return 0, s.fail(ctx, rep.on(cmd, err), reads)
	}
	ms := t.UnixMilli()
	s.clock.observe(ms)
	return ms, nil
}

// pipelined returns readKeys' commands in the order they were sent (before
// and after are nil in a cluster).
func pipelined(before *redis.TimeCmd, gets []*redis.StringCmd, ats []*redis.Cmd, after *redis.TimeCmd) []redis.Cmder {
	out := make([]redis.Cmder, 0, 2*len(gets)+2)
	if before != nil {
		out = append(out, before)
	}
	for i := range gets {
		out = append(out, gets[i], ats[i])
	}
	if after != nil {
		out = append(out, after)
	}
	return out
}

// cmders returns cmds as redis.Cmders.
func cmders[C redis.Cmder](cmds []C) []redis.Cmder {
	out := make([]redis.Cmder, len(cmds))
	for i, c := range cmds {
		out[i] = c
	}
	return out
}

// pageMoved is the error of a page of a listing that a cluster redirect
// stopped: a key's slot moved again while go-redis followed it (it
// follows a few redirects of a pipeline's command itself). cause is the
// redirect, classified (ErrUnavailable).
type pageMoved struct{ cause error }

func (p *pageMoved) Error() string { return p.cause.Error() }
func (p *pageMoved) Unwrap() error { return p.cause }

// pageErr classifies err, a read's error in a page of a listing: a
// redirect is a *pageMoved, which onSettled reads again.
func (s *store) pageErr(ctx context.Context, err error) error {
	if s.cluster != nil && redirect(err) {
		return &pageMoved{cause: s.fail(ctx, err, reads)}
	}
	return s.fail(ctx, err, reads)
}

// onSettled runs read, a page of a listing, and again, after a pause,
// while a cluster redirect stops it (*pageMoved: a slot of its keys moving
// between masters faster than go-redis followed it), for up to the
// store's migrationWait; then the redirect's error (ErrUnavailable).
func onSettled[T any](ctx context.Context, s *store, read func() (T, int64, error)) (T, int64, error) {
	var deadline time.Time
	for try := 0; ; try++ {
		page, now, err := read()
		var pm *pageMoved
		if !errors.As(err, &pm) {
			return page, now, err
		}
		if try == 0 {
			deadline = time.Now().Add(s.migrationWait)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return page, 0, pm.cause
		}
		pause := min(slotPauseMax, slotPauseMin<<min(try, 5), left)
		if err := s.pause(ctx, pause); err != nil {
			return page, 0, fmt.Errorf("statekit: %w", err)
		}
	}
}

// rawKey is one key as a page read it.
type rawKey struct {
	key string // the statekit key
	val string
	at  int64 // the deadline, ms since the epoch; -1 for none
	err error // the GET's error reply: WRONGTYPE, the one readKeys passes on
}

// wrongType reports whether err is the WRONGTYPE reply of a key holding a
// Redis type statekit never writes: a damaged key, where any other reply
// error says the server could not read it.
func wrongType(err error) bool {
	return !isNetError(err) && strings.HasPrefix(err.Error(), "WRONGTYPE")
}

// readKeys is readKeysOnce, run again while the slot of a key it reads
// keeps moving (onSettled).
func (s *store) readKeys(ctx context.Context, rkeys []string) ([]rawKey, int64, error) {
	return onSettled(ctx, s, func() ([]rawKey, int64, error) { return s.readKeysOnce(ctx, rkeys) })
}

// readKeysOnce reads the values and deadlines of Redis keys (all under prefix+"k:")
// and the server time they are live at; keys gone since the listing are
// left out. The time is read after the keys, in the same pipeline (so on
// the same server): a key Redis expired before its read had expired by
// then too, and one read present but with its deadline at or before then
// is left out, so every key reported was live at the time returned, as a
// page of the file engine's Scan is at its now.
func (s *store) readKeysOnce(ctx context.Context, rkeys []string) ([]rawKey, int64, error) {
	if len(rkeys) == 0 {
		now, err := s.serverNow(ctx)
		return nil, now, err
	}
	gets := make([]*redis.StringCmd, len(rkeys))
	ats := make([]*redis.Cmd, len(rkeys))
	old := s.noExpireTime.Load()
	// One server: its TIME in the pipeline, before and after the keys.
	// A cluster's pipeline goes to several masters: TIME is read from one
	// of them before and after it.
	var before, after *redis.TimeCmd
	var start, now int64
	ctx, rep := withReplies(ctx) // which master failed a read (replied.go)
	if s.cluster != nil {
		var err error
		if start, err = s.serverNow(ctx); err != nil {
			return nil, 0, err
		}
	}
	_, err := s.uc.Pipelined(ctx, func(p redis.Pipeliner) error {
		if s.cluster == nil {
			before = p.Time(ctx)
		}
		for i, k := range rkeys {
			gets[i] = p.Get(ctx, k)
			if old {
				ats[i] = p.Do(ctx, "PTTL", k)
			} else {
				ats[i] = p.Do(ctx, "PEXPIRETIME", k)
			}
		}
		if s.cluster == nil {
			after = p.Time(ctx)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && isNetError(err) {
		return nil, 0, s.fail(ctx, rep.first(err, pipelined(before, gets, ats, after)...), reads)
	}
	if s.cluster != nil {
		if now, err = s.serverNow(ctx); err != nil {
			return nil, 0, err
		}
	} else {
		t0, err0 := before.Result()
		t1, err1 := after.Result()
		if err := errors.Join(err0, err1); err != nil {
			return nil, 0, s.fail(ctx, err, reads)
		}
		start, now = t0.UnixMilli(), t1.UnixMilli()
		s.clock.observe(now)
	}
	base := len(s.cfg.prefix) + len("k:")
	out := make([]rawKey, 0, len(rkeys))
	for i, k := range rkeys {
		v, gerr := gets[i].Result()
		if errors.Is(gerr, redis.Nil) {
			continue
		}
		if gerr != nil && !wrongType(gerr) {
			// Only WRONGTYPE is a damaged key; any other reply
			// (CLUSTERDOWN, LOADING, ...) fails the listing.
			return nil, 0, s.pageErr(ctx, rep.on(gets[i], gerr))
		}
		at, terr := ats[i].Int64()
		if !old && unknownCommand(terr) {
			s.noExpireTime.Store(true) // before Redis 7: read PTTL
			return s.readKeysOnce(ctx, rkeys)
		}
		if terr != nil && gerr == nil {
			return nil, 0, s.pageErr(ctx, rep.on(ats[i], terr))
		}
		if gerr == nil && terr == nil && at == -2 {
			// The key was there for GET and gone for PEXPIRETIME (or
			// PTTL): Redis expired it, or a client deleted it, between
			// the two; either way it is gone at now, read after both.
			// Taking -2 for "no deadline" listed an expired key as live
			// for ever (TestScanLeavesOutAKeyAtItsDeadline).
			continue
		}
		r := rawKey{key: k[base:], val: v, at: -1, err: gerr}
		switch {
		case gerr != nil || at < 0:
		case old:
			r.at = start + at // PTTL counts from a time after start: at most a little early
		default:
			r.at = at
		}
		if r.at >= 0 && r.at <= now {
			continue // at its deadline: gone, as live_get says
		}
		out = append(out, r)
	}
	return out, now, nil
}

// Scan calls fn for each live key that starts with prefix, in byte order.
// Redis deletes expired keys itself, so includeExpired finds none.
//
// In a cluster the keys are listed by SCAN on every master at once, and
// the slots that moved meanwhile again on their own (listCluster), then
// read, page by page (a page a redirect stopped is read again while its
// slot settles: onSettled). Leases, Stats and Check list the same way. A
// master that answers a key's read with an error other than
// WRONGTYPE (CLUSTERDOWN, LOADING, ...) fails the listing with that error
// classified (ErrUnavailable); only WRONGTYPE is reported as damage.
func (s *store) Scan(ctx context.Context, prefix string, includeExpired bool, fn func(state.KeyInfo) error) error {
	rkeys, err := s.list(ctx, s.keyOf(prefix))
	if err != nil {
		return err
	}
	for start := 0; start < len(rkeys); start += scanPage {
		page, now, err := s.readKeys(ctx, rkeys[start:min(start+scanPage, len(rkeys))])
		if err != nil {
			return err
		}
		hooks.NoteNow(ctx, now) // the time this page was judged at, as each page of the file engine's
		for _, r := range page {
			if r.err != nil {
				return fmt.Errorf("key %q: %w", r.key, s.fail(ctx, r.err, reads))
			}
			v, err := decode(r.val)
			if err != nil {
				return fmt.Errorf("key %q: %w", r.key, err)
			}
			k := state.KeyInfo{Key: r.key, Value: v, Left: state.NoExpiry}
			if r.at >= 0 {
				k.Expires = time.UnixMilli(r.at)
				k.Left = msDuration(r.at - now)
			}
			if err := fn(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// rawLease is one lease hash as a page read it.
type rawLease struct {
	name                  string
	owner, token, expires any
	err                   error
}

// readLeases is readLeasesOnce, run again while the slot of a lease it
// reads keeps moving (onSettled).
func (s *store) readLeases(ctx context.Context, rkeys []string) ([]rawLease, int64, error) {
	return onSettled(ctx, s, func() ([]rawLease, int64, error) { return s.readLeasesOnce(ctx, rkeys) })
}

// readLeasesOnce reads the fields of lease hashes and the server time. A
// hash of another type (WRONGTYPE) is passed on in its rawLease; any other
// error fails the read.
func (s *store) readLeasesOnce(ctx context.Context, rkeys []string) ([]rawLease, int64, error) {
	now, err := s.serverNow(ctx)
	if err != nil {
		return nil, 0, err
	}
	cmds := make([]*redis.SliceCmd, len(rkeys))
	ctx, rep := withReplies(ctx) // which master failed a read (replied.go)
	_, err = s.uc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range rkeys {
			cmds[i] = p.HMGet(ctx, k, "owner", "token", "expires")
		}
		return nil
	})
	if err != nil && isNetError(err) {
		return nil, 0, s.fail(ctx, rep.first(err, cmders(cmds)...), reads)
	}
	base := len(s.cfg.prefix) + len("lease:")
	out := make([]rawLease, 0, len(rkeys))
	for i, k := range rkeys {
		f, err := cmds[i].Result()
		r := rawLease{name: k[base:], err: err}
		if err == nil {
			if f[0] == nil && f[1] == nil && f[2] == nil {
				continue // gone since the listing
			}
			r.owner, r.token, r.expires = f[0], f[1], f[2]
		} else if !wrongType(err) {
			return nil, 0, s.pageErr(ctx, rep.on(cmds[i], err)) // not a damaged lease: CLUSTERDOWN, LOADING, ...
		}
		out = append(out, r)
	}
	return out, now, nil
}

// info converts a lease hash, or says what is wrong with it.
func (r rawLease) info(now int64) (state.LeaseInfo, string) {
	if r.err != nil {
		return state.LeaseInfo{}, r.err.Error()
	}
	owner, token, at, bad := leaseHash(r.owner, r.token, r.expires)
	if bad != "" {
		return state.LeaseInfo{}, bad
	}
	l := state.LeaseInfo{Name: r.name, Owner: owner, Token: token}
	switch {
	case at > now:
		l.Status = state.LeaseHeld
	case at == 0:
		l.Status = state.LeaseReleased
	default:
		l.Status = state.LeaseExpired
	}
	if at != 0 {
		l.Expires = time.UnixMilli(at)
		l.Left = msDuration(at - now)
	}
	return l, ""
}

// Leases calls fn for each lease in byte order of the names: the held ones,
// and with includeFree the expired and released ones too.
func (s *store) Leases(ctx context.Context, includeFree bool, fn func(state.LeaseInfo) error) error {
	rkeys, err := s.list(ctx, s.leaseOf(""))
	if err != nil {
		return err
	}
	for start := 0; start < len(rkeys); start += scanPage {
		page, now, err := s.readLeases(ctx, rkeys[start:min(start+scanPage, len(rkeys))])
		if err != nil {
			return err
		}
		hooks.NoteNow(ctx, now)
		for _, r := range page {
			l, bad := r.info(now)
			if bad != "" {
				return fmt.Errorf("%w: lease %q: %s", state.ErrCorrupt, r.name, bad)
			}
			if l.Status != state.LeaseHeld && !includeFree {
				continue
			}
			if err := fn(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stats counts keys and leases by SCAN. The file-only fields stay zero;
// Now and Wall are the server's time.
func (s *store) Stats(ctx context.Context) (state.Stats, error) {
	var st state.Stats
	rkeys, err := s.list(ctx, s.keyOf(""))
	if err != nil {
		return st, err
	}
	for start := 0; start < len(rkeys); start += scanPage {
		page, _, err := s.readKeys(ctx, rkeys[start:min(start+scanPage, len(rkeys))])
		if err != nil {
			return state.Stats{}, err
		}
		for _, r := range page {
			st.Keys++
			if r.err == nil && r.at >= 0 {
				st.KeysWithDeadline++
			}
		}
	}
	lkeys, err := s.list(ctx, s.leaseOf(""))
	if err != nil {
		return state.Stats{}, err
	}
	for start := 0; start < len(lkeys); start += scanPage {
		page, now, err := s.readLeases(ctx, lkeys[start:min(start+scanPage, len(lkeys))])
		if err != nil {
			return state.Stats{}, err
		}
		for _, r := range page {
			st.LeaseNames++
			if l, bad := r.info(now); bad == "" && l.Status == state.LeaseHeld {
				st.Leases++
			}
		}
	}
	now, err := s.serverNow(ctx)
	if err != nil {
		return state.Stats{}, err
	}
	st.Now = time.UnixMilli(now)
	st.Wall = st.Now
	return st, nil
}

// maxFindings bounds what Check reports, as the file engine's does.
const maxFindings = 100

// Check reads every key and lease of the store and returns what is wrong:
// a value without a valid tag, a lease hash with a missing field or a
// token under 1, a key of another Redis type. It returns nil for a sound
// store.
func (s *store) Check(ctx context.Context) ([]string, error) {
	var findings []string
	add := func(format string, args ...any) bool {
		findings = append(findings, fmt.Sprintf(format, args...))
		return len(findings) < maxFindings
	}
	rkeys, err := s.list(ctx, s.keyOf(""))
	if err != nil {
		return nil, err
	}
	for start := 0; start < len(rkeys); start += scanPage {
		page, _, err := s.readKeys(ctx, rkeys[start:min(start+scanPage, len(rkeys))])
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			var bad string
			if r.err != nil {
				bad = r.err.Error()
			} else if _, err := decode(r.val); err != nil {
				bad = err.Error()
			}
			if bad != "" && !add("key %q: %s", r.key, bad) {
				return findings, nil
			}
		}
	}
	lkeys, err := s.list(ctx, s.leaseOf(""))
	if err != nil {
		return nil, err
	}
	for start := 0; start < len(lkeys); start += scanPage {
		page, now, err := s.readLeases(ctx, lkeys[start:min(start+scanPage, len(lkeys))])
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			if _, bad := r.info(now); bad != "" && !add("lease %q: %s", r.name, bad) {
				return findings, nil
			}
		}
	}
	return findings, nil
}
