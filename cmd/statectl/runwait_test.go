package main

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPauseSaysTheWaitBeforeItRunsOut: the refusal that begins the wait
// has all of it left, however short it is and however late the pause runs,
// so a run that waits for another owner always says so first; the next
// refusal, once the wait has passed, gives up saying it waited. A wait of
// 1 ns has passed before any clock read after its start (this failed when
// the first pause measured what was left of it).
func TestPauseSaysTheWaitBeforeItRunsOut(t *testing.T) {
	var errOut bytes.Buffer
	w := newWaiter(&app{stderr: &errOut}, "app.state", runOptions{lease: "job", wait: time.Nanosecond}, nil)
	const why = `app.state: lease "job" is held by "a" for 1m0s more`

	require.NoError(t, w.pause(exitHeld, why, time.Millisecond), "the first refusal waits")
	assert.Equal(t, "statectl: "+why+"; waiting up to 1ns\n", errOut.String())

	time.Sleep(time.Millisecond)
	err := w.pause(exitHeld, why, time.Millisecond)
	var e *exitErr
	require.True(t, errors.As(err, &e), "the wait ran out: %v", err)
	assert.Equal(t, exitHeld, e.code)
	assert.Equal(t, why+" (waited 1ns)", e.msg)
	assert.Equal(t, "statectl: "+why+"; waiting up to 1ns\n", errOut.String(), "said once")
}

// TestPauseWithoutWaitGivesUpAtOnce: with no --wait the first refusal is
// the exit, with nothing said about waiting.
func TestPauseWithoutWaitGivesUpAtOnce(t *testing.T) {
	var errOut bytes.Buffer
	w := newWaiter(&app{stderr: &errOut}, "app.state", runOptions{lease: "job"}, nil)
	err := w.pause(exitHeld, "held", time.Millisecond)
	var e *exitErr
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, "held", e.msg)
	assert.Empty(t, errOut.String())
}
