package stress_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/statekit/statekit/stress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInterruptedRunIsStillChecked: a run whose context ends (Ctrl-C,
// SIGTERM) stops its workers and checks what they did; before, the check
// read the resource and the file with the ended context and Run failed
// with "context canceled", saying nothing of what ran.
func TestInterruptedRunIsStillChecked(t *testing.T) {
	cfg := short(t)
	cfg.KillEvery = -1
	cfg.Until = stress.Work{Calls: 3000}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rep, err := stress.Run(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, stress.StoppedInterrupted, rep.Stopped)
	assert.Equal(t, cfg.Processes+stress.DefaultReaders, rep.Started)
	assert.Contains(t, rep.Linearizability, "Ok")
	assert.True(t, rep.Has(stress.KindShortRun), "it was to do %s: %v", cfg.Until, rep.Violations)
}

// TestAWorkerThatExitsByItselfStopsTheAttack: a worker that cannot run (a
// full disk, a file it cannot open) is not started again and again until
// the run's time is up (a full disk made hundreds of workers a second).
// The run's time is a cap for a loaded machine, not a speed target: the
// run must see a worker exit before its time passes, and a run that
// restarts it goes on until then. (With a second, starting the workers
// on a loaded machine could take all of it: the run stopped for its time.)
func TestAWorkerThatExitsByItselfStopsTheAttack(t *testing.T) {
	exe, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false(1)")
	}
	cfg := short(t)
	cfg.Exe = exe // exits 1 at once, as a worker that cannot open its files does
	cfg.KillEvery = -1
	cfg.Duration = time.Minute
	cfg.Until = stress.Work{}
	rep, err := stress.Run(t.Context(), cfg)
	require.NoError(t, err)
	assert.Equal(t, stress.StoppedWorkerExited, rep.Stopped)
	assert.Equal(t, cfg.Processes+stress.DefaultReaders, rep.Started, "no worker was started again")
	assert.True(t, rep.Has(stress.KindWorker), "%v", rep.Violations)
}

// TestRunRefusesWorkItCannotDo: work Until asks for that the run can
// never do is refused at once, not run until the cap and failed.
func TestRunRefusesWorkItCannotDo(t *testing.T) {
	for _, cfg := range []stress.Config{
		{Redis: &stress.Redis{}, Until: stress.Work{Swept: 1}},                             // Redis expires keys itself
		{Redis: &stress.Redis{URL: "redis://127.0.0.1:1/0"}, Until: stress.Work{Swept: 1}}, // the same
		{Processes: 1, Until: stress.Work{Contended: 1}},                                   // contended between processes
		{MaxOps: 100, Until: stress.Work{Calls: 101}},                                      // stops at MaxOps first
		{Redis: &stress.Redis{URL: "http://127.0.0.1:1/0"}},                                // not a Redis URL
		{CheckTimeout: -time.Second},
		{Duration: stress.MaxDuration + time.Second},
	} {
		if !assert.ErrorIs(t, cfg.Validate(), stress.ErrConfig, "%+v", cfg) {
			continue // Run would attack for minutes
		}
		cfg.Dir = t.TempDir()
		_, err := stress.Run(t.Context(), cfg)
		assert.ErrorIs(t, err, stress.ErrConfig, "%+v", cfg)
	}
	assert.NoError(t, stress.Config{}.Validate(), "Validate leaves Dir to Run")
}
