// Package verbtest is the table of verb cases every statekit backend must
// pass: the same cases run against the SQLite file engine (state) and the
// Redis store (redisstate), through the one type users hold, *state.DB.
//
// The cases run on real time only: a backend opened from a URL follows its
// server's clock, so nothing here steps a clock. Expiry is checked with short
// real TTLs (about 100 ms) and a poll under a generous cap (see waitCap);
// no case asserts that anything happens sooner than that cap, and no case
// sleeps and then asserts an exact time. Cases that need a hand-stepped clock
// (a deadline exact to the millisecond, a wall clock that steps back) stay in
// state's own tests.
//
// Where the backends differ by design, Options says so; everything else is
// one promise, checked the same way on both.
package verbtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Options describes what a backend documents differently. The zero Options
// is a backend without any of the file engine's extras.
type Options struct {
	// SweepReportsRows: Sweep deletes the expired keys itself and returns
	// how many it deleted (the file engine). Without it, the store expires
	// keys on its own and Sweep returns 0 (Redis).
	SweepReportsRows bool
	// ScanSeesExpired: Scan with includeExpired reports a key past its
	// deadline that no sweep has deleted yet, marked Expired (the file
	// engine). Without it the store may drop such keys before Scan reads
	// them (Redis removes an expired key when a command touches it); a key
	// Scan does report past its deadline must still be marked Expired.
	ScanSeesExpired bool
	// FileStats: Stats fills in the fields that describe a file
	// (SchemaVersion, PageSize, Pages, HighWater, Now, ClockBehind).
	FileStats bool
}

// Run runs every verb case as a subtest of t, in parallel, each on a store
// of its own: open must return a fresh, empty, open store for the subtest
// it is given (a new file, or a new key prefix on a shared server). Run
// closes each store when its case ends; a second Close's ErrClosed is
// ignored, so a case may close its store itself. A case may open a second
// handle on its store, as another process would, with
// state.Open(db.Path()) and no options: the name a store reports must open
// it again (a URL without a password does).
func Run(t *testing.T, open func(t *testing.T) *state.DB, opts Options) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range allCases() {
		if seen[c.name] {
			t.Fatalf("verbtest: two cases are named %q", c.name)
		}
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			require.NotNil(t, db, "open returned no store")
			t.Cleanup(func() {
				if err := db.Close(); err != nil && !errors.Is(err, state.ErrClosed) {
					t.Errorf("close: %v", err)
				}
			})
			c.run(t, &env{t: t, db: db, ctx: context.Background(), opts: opts})
		})
	}
}

// verbCase is one named case of the table.
type verbCase struct {
	name string
	run  func(t *testing.T, e *env)
}

// allCases is the whole table, family by family.
func allCases() []verbCase {
	var all []verbCase
	for _, family := range [][]verbCase{
		kvCases, counterCases, casCases, expireCases, expiryCases,
		leaseCases, txCases, bufferedCases, listCases, handleCases, inputCases, ctxCases,
	} {
		all = append(all, family...)
	}
	return all
}

// Timing bounds. waitCap is how long a poll waits for something that real
// time must bring about (a 100 ms deadline passing); it is a cap for a busy
// machine, never a speed target. short is the TTL the expiry cases give.
// early is how much sooner than its TTL a key may disappear, as seen from
// the test: both sides count deadlines in whole milliseconds.
const (
	waitCap   = 5 * time.Second
	pollEvery = 5 * time.Millisecond
	short     = 100 * time.Millisecond
	early     = 10 * time.Millisecond
	// skew is how far a deadline the store reports may sit outside the
	// bracket of db.Now() read before and after the call: milliseconds
	// rounded on each side.
	skew = 2 * time.Millisecond
)

// env is what a case works with: its store and the options of its backend.
type env struct {
	t    *testing.T
	db   *state.DB
	ctx  context.Context
	opts Options
}

// get returns "int:N", "bytes:TEXT" or "<absent>" for key, failing the test
// on any other error.
func (e *env) get(key string) string {
	e.t.Helper()
	v, err := e.db.Get(e.ctx, key)
	if err != nil {
		require.ErrorIs(e.t, err, state.ErrNotFound, "get %q", key)
		return "<absent>"
	}
	return show(v)
}

// show is a Value as "int:N" or "bytes:TEXT".
func show(v state.Value) string {
	if v.IsInt() {
		return "int:" + v.String()
	}
	return "bytes:" + v.String()
}

// set stores value under key or fails the test.
func (e *env) set(key string, value any, opts ...state.WriteOption) {
	e.t.Helper()
	require.NoError(e.t, e.db.Set(e.ctx, key, value, opts...), "set %q", key)
}

// ttl returns TTL(key) or fails the test.
func (e *env) ttl(key string) time.Duration {
	e.t.Helper()
	left, err := e.db.TTL(e.ctx, key)
	require.NoError(e.t, err, "ttl %q", key)
	return left
}

// ttlWithin asserts that key has a deadline at most max away and more than
// max-slack: a deadline given as max from now, read back a moment later.
func (e *env) ttlWithin(key string, max time.Duration, msg string) {
	e.t.Helper()
	left := e.ttl(key)
	assert.LessOrEqual(e.t, left, max, "%s: TTL(%q)", msg, key)
	assert.Greater(e.t, left, max-time.Minute, "%s: TTL(%q)", msg, key)
}

// noExpiry asserts that key is live without a deadline.
func (e *env) noExpiry(key, msg string) {
	e.t.Helper()
	assert.Equal(e.t, state.NoExpiry, e.ttl(key), "%s: TTL(%q)", msg, key)
}

// waitAbsent polls Get until key is absent, for at most waitCap, and
// checks that it did not go sooner than ttl after since (a time read before
// the write that gave the deadline).
func (e *env) waitAbsent(key string, since time.Time, ttl time.Duration) {
	e.t.Helper()
	for {
		_, err := e.db.Get(e.ctx, key)
		if errors.Is(err, state.ErrNotFound) {
			gone := time.Since(since)
			assert.GreaterOrEqual(e.t, gone, ttl-early, "%q went absent %v after its write, before its TTL %v", key, gone, ttl)
			return
		}
		require.NoError(e.t, err, "get %q while waiting for its deadline", key)
		if time.Since(since) > waitCap {
			e.t.Fatalf("%q still live %v after it was given a TTL of %v", key, waitCap, ttl)
		}
		time.Sleep(pollEvery)
	}
}

// waitPast polls db.Now() until it is past deadline, for at most waitCap
// after the deadline's own distance: a lease's Expires is in the store's
// time, which db.Now() reads.
func (e *env) waitPast(deadline time.Time) {
	e.t.Helper()
	start := time.Now()
	limit := time.Until(deadline)
	if limit < 0 {
		limit = 0
	}
	limit += waitCap
	for !e.db.Now().After(deadline.Add(skew)) {
		if time.Since(start) > limit {
			e.t.Fatalf("the store's time %v never passed %v", e.db.Now(), deadline)
		}
		time.Sleep(pollEvery)
	}
}

// bracket asserts that deadline is ttl after a time between before and
// after (both read from db.Now() around the call that set it).
func (e *env) bracket(deadline, before, after time.Time, ttl time.Duration, msg string) {
	e.t.Helper()
	lo, hi := before.Add(ttl-skew), after.Add(ttl+skew)
	assert.False(e.t, deadline.Before(lo) || deadline.After(hi),
		"%s: deadline %v not within [%v, %v] (ttl %v from a now between the reads around the call)", msg, deadline, lo, hi, ttl)
}

// scan collects Scan(prefix, includeExpired) or fails the test.
func (e *env) scan(prefix string, includeExpired bool) []state.KeyInfo {
	e.t.Helper()
	var got []state.KeyInfo
	require.NoError(e.t, e.db.Scan(e.ctx, prefix, includeExpired, func(k state.KeyInfo) error {
		got = append(got, k)
		return nil
	}), "scan %q", prefix)
	return got
}

// scanKeys is the keys Scan(prefix, includeExpired) reports, in its order.
func (e *env) scanKeys(prefix string, includeExpired bool) []string {
	e.t.Helper()
	var keys []string
	for _, k := range e.scan(prefix, includeExpired) {
		keys = append(keys, k.Key)
	}
	return keys
}

// leases collects Leases(includeFree) or fails the test.
func (e *env) leases(includeFree bool) []state.LeaseInfo {
	e.t.Helper()
	var got []state.LeaseInfo
	require.NoError(e.t, e.db.Leases(e.ctx, includeFree, func(l state.LeaseInfo) error {
		got = append(got, l)
		return nil
	}), "leases")
	return got
}

// empty asserts that the store holds no key, live or expired, and no lease
// row: what a refused call must leave behind.
func (e *env) empty(msg string) {
	e.t.Helper()
	assert.Empty(e.t, e.scanKeys("", true), "%s: keys", msg)
	assert.Empty(e.t, e.leases(true), "%s: leases", msg)
}

// stringOf is n copies of c.
func stringOf(c byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}
