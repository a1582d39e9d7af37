package sim

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClassifyBelievesAnErrorOnlyWhereAFaultExplainsIt: an engine error is
// taken as the fault's doing only when a fault of its kind came: ErrDiskFull
// with no write refused for room, or ErrIO with no error injected, is the
// engine's (engine-error); ErrCorrupt always is (integrity); an error of
// no known kind is too. A disk that was full explains ErrDiskFull.
func TestClassifyBelievesAnErrorOnlyWhereAFaultExplainsIt(t *testing.T) {
	w := quietWorld(t)
	p := w.procs[0]
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	for _, c := range []struct {
		err   error
		want  failure
		check string
	}{
		{fmt.Errorf("set: %w", state.ErrDiskFull), failFull, CheckEngineError},
		{fmt.Errorf("set: %w", state.ErrIO), failDead, CheckEngineError},
		{fmt.Errorf("set: %w", state.ErrCorrupt), failDead, CheckIntegrity},
		{errors.New("set: something else"), failOther, CheckEngineError},
	} {
		w.violations = nil
		assert.Equal(t, c.want, w.classify(p, "set", c.err, w.mark()), "%v", c.err)
		assert.Equal(t, []string{c.check}, failed(w), "%v: no fault explains it", c.err)
	}

	w.violations = nil
	w.m.SetWriteBudget(0)
	var err error
	var before mark
	w.sched.spawn(kindTask, "writer", p, w.newClient(), func(*thread) {
		before = w.mark()
		err = p.db.Set(t.Context(), w.keys[0], bytes.Repeat([]byte("x"), 4096))
	})
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	require.ErrorIs(t, err, state.ErrDiskFull)
	assert.Equal(t, failFull, w.classify(p, "set", err, before))
	assert.Empty(t, w.violations, "the full disk explains it")
}
