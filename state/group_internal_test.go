package state

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walWatchFS is a simulated disk that calls onWrite before each write to
// a WAL file, as a COMMIT makes.
type walWatchFS struct {
	*faults.ProcessFS
	onWrite func()
}

func (f *walWatchFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	file, err := f.ProcessFS.Open(name, flags)
	if err != nil || flags&vfs.OpenWAL == 0 {
		return file, err
	}
	return walWatchFile{File: file, fs: f}, nil
}

type walWatchFile struct {
	vfs.File
	fs *walWatchFS
}

func (f walWatchFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.onWrite != nil {
		f.fs.onWrite()
	}
	return f.File.WriteAt(p, off)
}

// TestGroupAnswersEachVerbItsOwnResultAfterItsCommit runs four verbs of
// four callers as one group, as a leader does: an Incr of bytes, an Incr,
// an IncrBy that overflows and a Set. Each gets its own answer (the two
// statement errors stay with their verbs and change nothing, the others
// are written), and none is answered before the group's COMMIT wrote the
// WAL. The group is made here rather than by goroutines that may or may
// not meet in the queue; the planted bugs group-early-answer and
// group-error-leak fail it.
func TestGroupAnswersEachVerbItsOwnResultAfterItsCommit(t *testing.T) {
	ctx := context.Background()
	w := &walWatchFS{ProcessFS: faults.NewMemFS(1).Process(1)}
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	db, err := Open("/sim/group.state", WithFS(w), WithClock(clock), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set(ctx, "text", "words"))
	require.NoError(t, db.Set(ctx, "max", int64(math.MaxInt64)))

	var good int64
	ops := []*pending{
		{fn: func(now int64) error { _, err := db.incrBy(ctx, now, "text", 1, 0); return err }},
		{fn: func(now int64) (err error) { good, err = db.incrBy(ctx, now, "good", 1, 0); return err }},
		{fn: func(now int64) error { _, err := db.incrBy(ctx, now, "max", 1, 0); return err }},
		{fn: func(now int64) error { return db.set(ctx, now, "k", IntValue(7), 0) }},
	}
	for _, o := range ops {
		o.ctx, o.a, o.wake = ctx, grouped, make(chan struct{}, 1)
	}
	walWrites := 0
	var early []int
	w.onWrite = func() {
		walWrites++
		for i, o := range ops {
			if o.state.Load() == opDone {
				early = append(early, i)
			}
		}
	}

	db.mu.Lock()
	db.runGroup(ops)
	db.mu.Unlock()
	w.onWrite = nil

	require.Positive(t, walWrites, "the group's COMMIT wrote no WAL frame")
	assert.Empty(t, early, "verbs answered while the COMMIT was writing the WAL")
	for i, o := range ops {
		require.Equal(t, opDone, o.state.Load(), "verb %d was not answered", i)
	}
	assert.ErrorIs(t, ops[0].err, ErrNotInteger, "the Incr of bytes")
	assert.NoError(t, ops[1].err, "the Incr beside it")
	assert.Equal(t, int64(1), good)
	assert.ErrorIs(t, ops[2].err, ErrOverflow, "the IncrBy past int64")
	assert.NoError(t, ops[3].err, "the Set")
	for key, want := range map[string]Value{
		"text": BytesValue([]byte("words")), "good": IntValue(1), "max": IntValue(math.MaxInt64), "k": IntValue(7),
	} {
		v, err := db.Get(ctx, key)
		require.NoError(t, err, key)
		assert.Equal(t, want, v, key)
	}
}
