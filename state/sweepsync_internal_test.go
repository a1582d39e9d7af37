package state

import (
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sweepEnds is a sweep observer that records what each sweep ended with.
type sweepEnds struct {
	mu   sync.Mutex
	ends []sweepEndCall
}

type sweepEndCall struct {
	keys []string
	err  error
}

func (o *sweepEnds) Sweeping(int64, bool) func([]string, error) {
	return func(keys []string, err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.ends = append(o.ends, sweepEndCall{keys, err})
	}
}

func (o *sweepEnds) get() []sweepEndCall {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]sweepEndCall(nil), o.ends...)
}

// TestSweepObserverIsToldAfterTheSync: on a handle that syncs its commits
// (SyncFull), a sweep transaction's observer hears of it after its commit's
// sync, and of that sync's failure. Told of the deleted keys before the
// sync, the simulator counted the sweep as done at its time, though a file
// system that drops a failed sync's pages took the sweep back, and the
// high-water mark written for its time with it: the next open started
// before that time, a clock violation that was the engine keeping its
// promise (statesim -seed 9600007 -procs 1 -syncfull -dropfailedsyncs
// -syncerror 0.02, before this test).
func TestSweepObserverIsToldAfterTheSync(t *testing.T) {
	ctx := t.Context()
	m := faults.NewMemFS(1)
	m.SetDropFailedSyncs(true)
	clock := faults.NewClock(time.UnixMilli(1_700_000_000_000))
	o := &sweepEnds{}
	db, err := Open("s.state", WithFS(m.Process(1)), WithClock(clock), WithoutBackground(), WithSync(SyncFull),
		hooks.Option(hooks.Engine{Sweeps: o}).(Option))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, db.Set(ctx, "gone", 1, TTL(time.Millisecond)))
	require.NoError(t, db.Set(ctx, "kept", 1))

	// A sweep whose sync works: told of the key, with no error.
	clock.Advance(time.Second)
	n, err := db.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []sweepEndCall{{keys: []string{"gone"}}}, o.get())

	// A sweep whose sync fails: told of the failure, and of no keys.
	require.NoError(t, db.Set(ctx, "gone", 1, TTL(time.Millisecond)))
	clock.Advance(time.Second) // past the mark's lead: the sweep writes it
	syncs := m.Stats().Syncs
	m.FailAt(faults.OpSync, 1)
	_, err = db.Sweep(ctx)
	require.ErrorIs(t, err, ErrIO)
	require.Equal(t, syncs+1, m.Stats().Syncs, "the sweep's commit was synced once, and that sync failed")
	ends := o.get()
	require.Len(t, ends, 2)
	assert.ErrorIs(t, ends[1].err, ErrIO, "the observer hears of the failed sync")
	assert.Nil(t, ends[1].keys)
}
