package state_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/require"
)

// t0 is the wall time every test clock starts at.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newClock() *faults.Clock { return faults.NewClock(t0) }

// planted plants bugs through the engine's internal hooks.
func planted(s bugs.Set) state.Option {
	return hooks.Option(hooks.Engine{Bugs: s}).(state.Option)
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
	{name: "osfs", opts: func(*testing.T) []state.Option { return []state.Option{state.WithFS(vfs.OS())} }},
	{name: "memfs", opts: func(t *testing.T) []state.Option {
		return []state.Option{state.WithFS(memFS(t).Process(1))}
	}},
}

// memFS returns the test's simulated disk: one per test, so a reopen in the
// same test finds its file.
func memFS(t *testing.T) *faults.MemFS {
	memMu.Lock()
	defer memMu.Unlock()
	if m, ok := memDisks[t.Name()]; ok {
		return m
	}
	m := faults.NewMemFS(1)
	memDisks[t.Name()] = m
	t.Cleanup(func() {
		memMu.Lock()
		defer memMu.Unlock()
		delete(memDisks, t.Name())
	})
	return m
}

var (
	memMu    sync.Mutex
	memDisks = map[string]*faults.MemFS{}
)

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
	clock *faults.Clock
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

// open opens f.path with f.clock, the backend's options and opts; with no
// opts, background work is off.
func (f *fixture) open(opts ...state.Option) *state.DB {
	f.t.Helper()
	all := []state.Option{state.WithClock(f.clock)}
	if len(opts) == 0 {
		all = append(all, state.WithoutBackground())
	}
	all = append(all, f.b.opts(f.t)...)
	db, err := state.Open(f.path, append(all, opts...)...)
	require.NoError(f.t, err)
	return db
}

// reopen closes the DB and opens it again as a new process would.
func (f *fixture) reopen(opts ...state.Option) {
	f.t.Helper()
	require.NoError(f.t, f.db.Close())
	f.clock = f.clock.Restart()
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
