package state_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncFullSyncsOutsideTheWriteLock: a SyncFull commit is synced after
// COMMIT, so while one process waits for its disk another writes the file.
// Process 1's Incr is held inside its sync of the WAL; process 2 then sets
// a key (it could not while process 1 held the file's write lock: its
// busy wait would end in ErrBusy) and reads process 1's increment, which is
// committed but not yet durable. The Incr is answered only once its sync
// returns. Then a power loss keeps it.
func TestSyncFullSyncsOutsideTheWriteLock(t *testing.T) {
	syncsOutsideTheWriteLock(t, []state.Option{state.WithSync(state.SyncFull)},
		func(ctx context.Context, db *state.DB) (int64, error) { return db.Incr(ctx, "k") },
		func(ctx context.Context, db *state.DB) (int64, error) {
			v, err := db.Get(ctx, "k")
			if err != nil {
				return 0, err
			}
			n, _ := v.Int()
			return n, nil
		})
}

// TestGrantSyncsOutsideTheWriteLock: so is a lease grant on a handle with
// the default options: while process 1's grant (the holder asking again, a
// second later: a new deadline) waits in its sync of the WAL, process 2
// writes the file and sees the new deadline; the grant is answered once the
// sync returns, and a power loss keeps it.
func TestGrantSyncsOutsideTheWriteLock(t *testing.T) {
	syncsOutsideTheWriteLock(t, nil,
		func(ctx context.Context, db *state.DB) (int64, error) {
			l, err := db.Lease(ctx, "job", "p1", time.Hour)
			if err != nil {
				return 0, err
			}
			return l.Expires.UnixMilli(), nil
		},
		func(ctx context.Context, db *state.DB) (int64, error) {
			var expires int64
			err := db.Leases(ctx, false, func(l state.LeaseInfo) error {
				if l.Name == "job" && l.Owner == "p1" {
					expires = l.Expires.UnixMilli()
				}
				return nil
			})
			return expires, err
		})
}

// syncsOutsideTheWriteLock runs write on process 1 (opened with opts) twice,
// a second apart, the second time held inside its sync of the WAL, and checks that process 2
// writes meanwhile and reads what the second write committed (read), that
// the write is answered only after its sync, and that a power loss after
// it keeps it.
func syncsOutsideTheWriteLock(t *testing.T, opts []state.Option, write, read func(context.Context, *state.DB) (int64, error)) {
	ctx := context.Background()
	m := faults.NewMemFS(3)
	clock := newClock()
	const path = "/sim/outside.state"
	gate := &walSyncGate{ProcessFS: m.Process(1)}
	all := append([]state.Option{state.WithFS(gate), state.WithClock(clock), state.WithoutBackground()}, opts...)
	db1, err := state.Open(path, all...)
	require.NoError(t, err)
	defer db1.Close()
	other, err := state.Open(path, state.WithFS(m.Process(2)), state.WithClock(clock), state.WithoutBackground(), state.WithBusyTimeout(100*time.Millisecond))
	require.NoError(t, err)
	defer other.Close()
	first, err := write(ctx, db1) // the first sync, and the time mark's, out of the way
	require.NoError(t, err)
	clock.Advance(time.Second)

	syncing, release := gate.hold()
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open() // before the handles close, should the test stop early
	type answer struct {
		v   int64
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		v, err := write(ctx, db1)
		answered <- answer{v, err}
	}()
	select {
	case <-syncing:
	case <-time.After(time.Minute):
		t.Fatal("the write never synced the WAL")
	}
	require.NoError(t, other.Set(ctx, "b", "x"), "another process writes while the commit syncs")
	seen, err := read(ctx, other)
	require.NoError(t, err)
	select {
	case a := <-answered:
		t.Fatalf("the write was answered (%v, %v) before its sync returned", a.v, a.err)
	default:
	}
	open()
	a := <-answered
	require.NoError(t, a.err)
	assert.NotEqual(t, first, a.v, "the second write changed what it wrote")
	assert.Equal(t, a.v, seen, "the commit is visible to another process before its sync returns")

	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	after, err := state.Open(path, state.WithFS(m.Process(3)), state.WithClock(clock), state.WithoutBackground())
	require.NoError(t, err)
	defer after.Close()
	got, err := read(ctx, after)
	require.NoError(t, err)
	assert.Equal(t, a.v, got, "the acknowledged write survives the power loss")
}

// walSyncGate is one process's view of a MemFS whose syncs of the WAL, by
// SQLite or by the engine, wait at a gate while one is held (hold).
type walSyncGate struct {
	*faults.ProcessFS
	mu      sync.Mutex
	syncing chan struct{} // closed by the first sync that waits
	release chan struct{} // closed by the test: the sync goes on
}

// hold makes the next syncs of the WAL wait until release is closed;
// syncing is closed when the first of them starts waiting.
func (g *walSyncGate) hold() (syncing <-chan struct{}, release chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.syncing, g.release = make(chan struct{}), make(chan struct{})
	return g.syncing, g.release
}

func (g *walSyncGate) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	f, err := g.ProcessFS.Open(name, flags)
	if err != nil || !strings.HasSuffix(name, "-wal") {
		return f, err
	}
	return &gatedFile{File: f, gate: g}, nil
}

type gatedFile struct {
	vfs.File
	gate *walSyncGate
}

func (f *gatedFile) Sync() error {
	g := f.gate
	g.mu.Lock()
	syncing, release := g.syncing, g.release
	if syncing != nil {
		select {
		case <-syncing:
		default:
			close(syncing)
		}
	}
	g.mu.Unlock()
	if release != nil {
		<-release
	}
	return f.File.Sync()
}

// Dead passes on the MemFS file's, so that a dead file stays dead to SQLite.
func (f *gatedFile) Dead() bool {
	d, ok := f.File.(vfs.Mortal)
	return ok && d.Dead()
}
