package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/model"
)

// infoWorld runs a process that sets the keys, half of them for 10 ms,
// and then, 100 ms later, the info check on its handle, with bugs planted.
func infoWorld(t *testing.T, planted bugs.Set) *world {
	t.Helper()
	cfg := DefaultConfig(1)
	cfg.Bugs = planted
	w := newWorld(cfg)
	t.Cleanup(func() { assert.True(t, w.teardown(), "the handle closes") })
	p := w.procs[0]
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	w.sched.spawn(kindTask, "writer", p, w.newClient(), func(th *thread) {
		for i, k := range w.keys {
			w.verb(th, p, th.client, &model.Input{Kind: model.Set, Key: k, Value: model.Int(1), TTLMillis: int64(i%2) * 10})
		}
	})
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	w.advance(100)
	checked := false
	w.sched.spawn(kindTask, "info", p, w.newClient(), func(th *thread) { checked = w.infoCheck(th, p) })
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	require.True(t, checked, "the info check made its calls")
	return w
}

// The verifier's info check passes on the engine as it is, and fails when
// Stats counts expired keys as live.
func TestInfoCheckCanFail(t *testing.T) {
	w := infoWorld(t, bugs.Set{})
	assert.Empty(t, w.violations)
	w = infoWorld(t, bugs.Set{}.With(bugs.StatsCountsExpired))
	assert.Equal(t, []string{CheckInfo}, failed(w))
}
