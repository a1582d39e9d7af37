package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state/vfs"
)

// TestForeignReaderKeepsTheWALFromStartingOver: while the foreign program
// keeps a read snapshot, no checkpoint may copy past it, and the WAL grows
// by every commit the process makes; once it ends its read, the WAL starts
// over again. A reader that exits as the file's last connection
// checkpoints and removes the WAL, and the process that opens the file
// next reads every value.
func TestForeignReaderKeepsTheWALFromStartingOver(t *testing.T) {
	const writes = 300
	w := quietWorld(t)
	p := w.procs[0]
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	value := int64(0)
	sets := func() {
		done := false
		w.sched.spawn(kindTask, "writer", p, w.newClient(), func(th *thread) {
			for range writes {
				value++
				w.verb(th, p, th.client, &model.Input{Kind: model.Set, Key: w.keys[0], Value: model.Int(value)})
			}
			done = true
		})
		require.True(t, w.runUntil(func() bool { return done }))
	}
	walSize := func() int64 {
		f, err := w.m.Process(foreignPID).Open(dbPath+"-wal", vfs.OpenReadOnly|vfs.OpenWAL)
		require.NoError(t, err)
		defer f.Close()
		n, err := f.Size()
		require.NoError(t, err)
		return n
	}
	// A commit of one key writes at least a page: 4,096 bytes and a
	// frame header.
	const grown = writes * 4096
	sets()
	quiet := walSize()
	sets()
	assert.Less(t, walSize()-quiet, int64(grown), "without a reader the WAL starts over")

	w.foreignNext = &foreignPlan{wal: true, read: true, hold: 600_000, exits: true}
	require.True(t, w.foreignStart())
	require.True(t, w.runUntil(func() bool { return w.foreignReading }))
	sets() // past the end of the WAL as it was
	before := walSize()
	sets()
	require.True(t, w.foreignReading, "it keeps its snapshot still")
	assert.GreaterOrEqual(t, walSize()-before, int64(grown), "behind the reader the WAL grew by every commit")

	require.True(t, w.runUntil(func() bool { return !w.outsider.starting }), "it ends its read")
	sets()
	held := walSize()
	sets()
	assert.Less(t, walSize()-held, int64(grown), "after the reader the WAL starts over again")

	w.stop(p, false)
	require.True(t, w.runUntil(func() bool { return p.db == nil && !p.stopping }))
	w.foreignNext = &foreignPlan{wal: true, read: true, hold: 1000, exits: true}
	require.True(t, w.foreignStart())
	require.True(t, w.runUntil(func() bool { return !w.outsider.starting }))
	assert.NotContains(t, w.m.Files(), dbPath+"-wal", "the last connection to close removed the WAL")

	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	var got model.Value
	w.sched.spawn(kindTask, "reader", p, w.newClient(), func(th *thread) {
		out, _ := w.verb(th, p, th.client, &model.Input{Kind: model.Get, Key: w.keys[0]})
		got = out.Value
	})
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	assert.Equal(t, model.Int(value), got)
	require.Empty(t, w.violations)
}

// TestForeignReaderDoesNotHoldUpAnOpen: a writable Open beside a reader on
// an older snapshot repairs the pages behind it without waiting for a
// checkpoint that copies the whole WAL, which the reader stops short. It
// waited out its whole busy timeout (5 s of virtual time) before.
func TestForeignReaderDoesNotHoldUpAnOpen(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	set := func() {
		done := false
		w.sched.spawn(kindTask, "writer", p, w.newClient(), func(th *thread) {
			w.verb(th, p, th.client, &model.Input{Kind: model.Set, Key: w.keys[0], Value: model.Int(1)})
			done = true
		})
		require.True(t, w.runUntil(func() bool { return done }))
	}
	set()
	w.foreignNext = &foreignPlan{wal: true, read: true, hold: 600_000, exits: true}
	require.True(t, w.foreignStart())
	require.True(t, w.runUntil(func() bool { return w.foreignReading }))
	set() // the reader's snapshot is older than the WAL's end from here
	w.stop(p, false)
	require.True(t, w.runUntil(func() bool { return p.db == nil && !p.stopping }))

	began := w.trueMillis
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return p.db != nil || !p.starting }))
	require.NotNil(t, p.db)
	assert.Less(t, w.trueMillis-began, int64(1000), "Open's virtual time beside the reader")
	assert.True(t, w.foreignReading, "the reader kept its snapshot")
	require.Empty(t, w.violations)
}
