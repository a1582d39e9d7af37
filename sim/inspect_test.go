package sim

import (
	"bytes"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
)

// visit runs one read-only visit of the inspector to its end.
func visit(t *testing.T, w *world, reads int) {
	t.Helper()
	visitAs(t, w, true, reads)
}

// visitAs runs one visit of the inspector, read-only or writing, to its end.
func visitAs(t *testing.T, w *world, readOnly bool, calls int) {
	t.Helper()
	p := w.inspector
	p.readOnly, p.reads = readOnly, calls
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool {
		for _, th := range w.sched.threads {
			if th.proc == p {
				return false
			}
		}
		return !p.starting && p.db == nil
	}))
}

// Before any writable open there is no statekit file, and statectl saying
// so is no failure; once a writable open has made one, a read-only open that
// finds none is.
func TestInspectorMayFindNoFileOnlyBeforeTheFirstOpen(t *testing.T) {
	w := quietWorld(t)
	visit(t, w, 1)
	assert.Empty(t, w.violations)
	assert.Empty(t, w.history)

	w.schemaSeen = true // as if a writable open had succeeded; the disk is still empty
	visit(t, w, 1)
	assert.Equal(t, []string{CheckEngineError}, failed(w))
}

// statectl's reads beside a writer are recorded as every client's are, so
// the linearizability check holds them to the model; it writes nothing.
func TestInspectorReadsAreRecorded(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	w.sched.spawn(kindTask, "writer", p, w.newClient(), func(th *thread) {
		for _, k := range w.keys {
			w.verb(th, p, th.client, &model.Input{Kind: model.Set, Key: k, Value: model.Int(7)})
		}
	})
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	writes := len(w.history)
	before := w.m.WritesBy(inspectorPID)

	visit(t, w, inspectCallsMax)
	require.Empty(t, w.violations)
	reads := w.history[writes:]
	require.NotEmpty(t, reads, "every visit reads, unless all its draws were checks")
	for _, op := range reads {
		assert.Contains(t, []model.Kind{model.Get, model.TTL, model.Scan, model.Leases}, op.Input.Kind)
		assert.False(t, op.Unknown)
		switch op.Input.Kind {
		case model.Get:
			assert.Equal(t, model.Int(7), op.Output.Value)
		case model.Scan:
			for _, r := range op.Output.Rows {
				assert.Equal(t, model.Int(7), r.Value, "%s", r.Key)
			}
		}
	}
	assert.Equal(t, before, w.m.WritesBy(inspectorPID), "a read-only handle writes nothing")
}

// A read-only handle writes no high-water mark, so the clock check holds
// later opens only to the times of writable handles: after the wall clock
// stepped forward and back, an open may start before a time statectl used.
// Its own time still may not go back or drift while it runs.
func TestClockCheckLeavesAReadOnlyHandlesTimesOut(t *testing.T) {
	w := quietWorld(t)
	p, ro := w.procs[0], w.inspector
	ahead := w.wallMillis() + 60_000 // the wall clock had stepped ahead
	ro.offset = ahead - w.trueMillis
	w.clock.started(w, ro, ahead)
	read := linearizability.Op{Client: 1, Input: model.Input{Kind: model.Get, Key: "k0", NowMillis: ahead}, Call: w.tick(), Return: w.tick()}
	w.record(ro, read)
	clock := w.readClock() // the wall clock is back
	w.clock.opened(w, p, w.wallMillis(), clock, w.clock.completed)
	assert.Empty(t, w.violations)

	w.clock.used(w, ro, ahead-1, w.trueMillis)
	assert.Equal(t, []string{CheckClock}, failed(w), "its time going back is still caught")

	w.violations = nil
	w.record(p, read) // the same read by a writable handle
	w.clock.opened(w, p, w.wallMillis(), clock, w.clock.completed)
	assert.Equal(t, []string{CheckClock}, failed(w), "a writable handle's time is one later opens start after")
}

// A writing visit (statectl set, incr, del) opens the file for writing
// without background work, creating it; its writes are recorded, and a
// read-only visit after it must find the file.
func TestInspectorWritesAreRecorded(t *testing.T) {
	w := quietWorld(t)
	visitAs(t, w, false, inspectCallsMax)
	require.Empty(t, w.violations)
	require.NotEmpty(t, w.history)
	for _, op := range w.history {
		// a sweep is recorded as the deletion of the keys it deleted
		assert.Contains(t, []model.Kind{model.Set, model.IncrBy, model.Del}, op.Input.Kind)
		assert.False(t, op.Unknown)
	}
	assert.True(t, w.schemaSeen, "a writable open made the file")
	opened := w.inspector.incarnation

	visit(t, w, 1)
	assert.Empty(t, w.violations)
	assert.Equal(t, opened+1, w.inspector.incarnation, "the read-only visit that follows opens the file")
}

// A listing (statectl dump, leases) is recorded with the rows of the keys
// and leases the history models, and only those: a recipe's rows, written
// by calls the history does not hold, are left out of its answer, or the
// check would find rows no call wrote.
func TestListingsKeepTheModelledRows(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	var scan, leases model.Output
	w.sched.spawn(kindTask, "lister", p, w.newClient(), func(th *thread) {
		w.verb(th, p, th.client, &model.Input{Kind: model.Set, Key: w.keys[0], Value: model.Int(7), TTLMillis: 1})
		w.verb(th, p, th.client, &model.Input{Kind: model.Lease, Key: w.leases[0], Owner: "c1", TTLMillis: 60_000})
		require.NoError(t, p.db.Set(w.ctx, fixedPrefix+"u1", 1)) // a recipe's row
		_, err := p.db.Lease(w.ctx, cacheValuePrefix+"fill", "c1", time.Minute)
		require.NoError(t, err)
		scan, _ = w.verb(th, p, th.client, &model.Input{Kind: model.Scan, All: true})
		leases, _ = w.verb(th, p, th.client, &model.Input{Kind: model.Leases, All: true})
	})
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	require.Empty(t, w.violations)
	require.Len(t, scan.Rows, 1)
	assert.Equal(t, w.keys[0], scan.Rows[0].Key)
	assert.Equal(t, model.Int(7), scan.Rows[0].Value)
	require.Len(t, leases.Leases, 1)
	assert.Equal(t, w.leases[0], leases.Leases[0].Name)
	last := w.history[len(w.history)-1]
	assert.Equal(t, model.Leases, last.Input.Kind)
	assert.True(t, last.Output.Equal(leases), "recorded as answered")
	assert.True(t, linearizability.Check(w.history, time.Minute).Ok())
}

// statectl sweep, a writing visit's call, deletes what expired and is
// recorded as any sweep is: the deletion of the keys it deleted.
func TestInspectorSweepsAreRecorded(t *testing.T) {
	cfg := DefaultConfig(1)
	var trace bytes.Buffer
	cfg.Trace = &trace
	w := newWorld(cfg)
	p := w.procs[0]
	// expired sets every key with a deadline, then stops p, which has no
	// sweeper of its own left: what expired waits for statectl.
	expired := func() {
		require.True(t, w.start(p))
		require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 && p.db != nil }))
		w.sched.spawn(kindTask, "writer", p, w.newClient(), func(th *thread) {
			for _, k := range w.keys {
				w.verb(th, p, th.client, &model.Input{Kind: model.Set, Key: k, Value: model.Int(7), TTLMillis: 1})
			}
		})
		require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
		w.stop(p, false)
		require.True(t, w.runUntil(func() bool { return p.db == nil }))
		w.advance(10) // past every deadline
	}
	swept := regexp.MustCompile(fmt.Sprintf(`p%d sweep: [1-9]`, inspectorPID))
	for range 50 {
		if swept.Match(trace.Bytes()) {
			break
		}
		expired()
		visitAs(t, w, false, inspectCallsMax)
	}
	require.Regexp(t, swept, trace.String(), "no visit swept in 50")
	require.Empty(t, w.violations)
	// A listing after it: every row the sweep deleted is gone, which only
	// its recorded deletion explains to the check.
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 && p.db != nil }))
	var rows model.Output
	w.sched.spawn(kindTask, "lister", p, w.newClient(), func(th *thread) {
		rows, _ = w.verb(th, p, th.client, &model.Input{Kind: model.Scan, All: true})
	})
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	assert.Less(t, len(rows.Rows), len(w.keys), "the sweep deleted rows: %s", rows)
	res := linearizability.Check(w.history, time.Minute)
	assert.True(t, res.Ok(), "%s\n%s", res, res.Description)
}
