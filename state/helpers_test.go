package state_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/require"
)

// t0 is the wall time every test clock starts at.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// stepClock is a state.Clock the test steps by hand.
type stepClock struct {
	mu   sync.Mutex
	wall time.Time
	mono time.Duration
}

func newClock() *stepClock { return &stepClock{wall: t0} }

func (c *stepClock) Wall() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall
}

func (c *stepClock) Monotonic() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

// advance moves both clocks, as time passing does.
func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
	c.mono += d
}

// stepWall moves only the wall clock.
func (c *stepClock) stepWall(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
}

// restart returns the clock of a new process: same wall, monotonic at zero.
func (c *stepClock) restart() *stepClock {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &stepClock{wall: c.wall}
}

// backend is one way to reach the file: every verb test runs on each.
type backend struct {
	name string
	// opts returns the options that select this backend for a file.
	opts func(t *testing.T) []state.Option
}

// backends lists the file systems the verb suite runs over.
var backends = []backend{
	{name: "native", opts: func(*testing.T) []state.Option { return nil }},
}

// forEachBackend runs fn as a subtest on every backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

// fixture is an open DB on a fresh file with a hand-stepped clock.
type fixture struct {
	t     *testing.T
	b     backend
	path  string
	clock *stepClock
	db    *state.DB
	ctx   context.Context
}

// newFixture opens a fresh file on backend b, background work off.
func newFixture(t *testing.T, b backend, opts ...state.Option) *fixture {
	t.Helper()
	f := &fixture{t: t, b: b, path: filepath.Join(t.TempDir(), "test.state"), clock: newClock(), ctx: context.Background()}
	f.db = f.open(opts...)
	t.Cleanup(func() { _ = f.db.Close() })
	return f
}

// open opens f.path with f.clock, the backend's options and opts.
func (f *fixture) open(opts ...state.Option) *state.DB {
	f.t.Helper()
	all := append([]state.Option{state.WithClock(f.clock), state.WithoutBackground()}, f.b.opts(f.t)...)
	db, err := state.Open(f.path, append(all, opts...)...)
	require.NoError(f.t, err)
	return db
}

// reopen closes the DB and opens it again as a new process would.
func (f *fixture) reopen(opts ...state.Option) {
	f.t.Helper()
	require.NoError(f.t, f.db.Close())
	f.clock = f.clock.restart()
	f.db = f.open(opts...)
}

// nowMillis is the DB's engine time.
func (f *fixture) nowMillis() int64 { return f.db.Now().UnixMilli() }

// get returns the value's text or "<absent>".
func (f *fixture) get(key string) string {
	f.t.Helper()
	v, err := f.db.Get(f.ctx, key)
	if err != nil {
		require.ErrorIs(f.t, err, state.ErrNotFound)
		return "<absent>"
	}
	if _, ok := v.Int(); ok {
		return "int:" + v.String()
	}
	return "bytes:" + v.String()
}
