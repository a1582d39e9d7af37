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
	ctx := context.Background()
	m := faults.NewMemFS(3)
	clock := newClock()
	const path = "/sim/full.state"
	gate := &walSyncGate{ProcessFS: m.Process(1)}
	full, err := state.Open(path, state.WithFS(gate), state.WithClock(clock), state.WithoutBackground(), state.WithSync(state.SyncFull))
	require.NoError(t, err)
	defer full.Close()
	other, err := state.Open(path, state.WithFS(m.Process(2)), state.WithClock(clock), state.WithoutBackground(), state.WithBusyTimeout(100*time.Millisecond))
	require.NoError(t, err)
	defer other.Close()
	_, err = full.Incr(ctx, "k") // the first sync, and the time mark's, out of the way
	require.NoError(t, err)

	syncing, release := gate.hold()
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open() // before the handles close, should the test stop early
	answered := make(chan error, 1)
	go func() {
		n, err := full.Incr(ctx, "k")
		if err == nil && n != 2 {
			err = assert.AnError
		}
		answered <- err
	}()
	select {
	case <-syncing:
	case <-time.After(time.Minute):
		t.Fatal("the SyncFull Incr never synced the WAL")
	}
	require.NoError(t, other.Set(ctx, "b", "x"), "another process writes while the SyncFull commit syncs")
	v, err := other.Get(ctx, "k")
	require.NoError(t, err)
	n, _ := v.Int()
	assert.Equal(t, int64(2), n, "the commit is visible before its sync returns")
	select {
	case err := <-answered:
		t.Fatalf("the SyncFull Incr was answered (%v) before its sync returned", err)
	default:
	}
	open()
	require.NoError(t, <-answered)

	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	after, err := state.Open(path, state.WithFS(m.Process(3)), state.WithClock(clock), state.WithoutBackground())
	require.NoError(t, err)
	defer after.Close()
	v, err = after.Get(ctx, "k")
	require.NoError(t, err)
	n, _ = v.Int()
	assert.Equal(t, int64(2), n, "the acknowledged SyncFull Incr survives the power loss")
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
