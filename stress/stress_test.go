package stress_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/stress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets Run re-execute this test binary as its workers.
func TestMain(m *testing.M) {
	stress.WorkerMain()
	os.Exit(m.Run())
}

// short is the run make test covers: small, but with real kills.
func short(t *testing.T) stress.Config {
	return stress.Config{
		Dir:       t.TempDir(),
		Processes: 3,
		Duration:  3 * time.Second,
		KillEvery: 150 * time.Millisecond,
		Seed:      1,
	}
}

func run(t *testing.T, cfg stress.Config) *stress.Report {
	t.Helper()
	rep, err := stress.Run(t.Context(), cfg)
	require.NoError(t, err)
	var b strings.Builder
	_, err = rep.WriteTo(&b)
	require.NoError(t, err)
	t.Log("\n" + b.String())
	return rep
}

func TestShortStressRunFindsNothing(t *testing.T) {
	rep := run(t, short(t))
	assert.True(t, rep.OK(), "violations: %v", rep.Violations)
	assert.Positive(t, rep.Kills, "workers were killed")
	assert.Equal(t, rep.Processes+rep.Kills, rep.Started, "each kill restarted its worker")
	assert.Greater(t, rep.Operations, 1000)
	assert.Positive(t, rep.Grants)
	assert.Positive(t, rep.Fenced)
	assert.Contains(t, rep.Linearizability, "Ok")
}

func TestStressCatchesLeaseTwoStatements(t *testing.T) {
	cfg := short(t)
	cfg.Bugs = bugs.Set{}.With(bugs.LeaseTwoStatements)
	rep := run(t, cfg)
	assert.True(t, rep.Has(stress.KindDuplicateToken), "the planted bug hands one token to two holders: %v", rep.Violations)
	assert.True(t, rep.Has(stress.KindLinearizability))
	assert.False(t, rep.OK())
}

func TestStressWithoutKillsStopsByOpCount(t *testing.T) {
	cfg := short(t)
	cfg.KillEvery = -1
	cfg.MaxOps = 500
	cfg.Duration = time.Minute
	start := time.Now()
	rep := run(t, cfg)
	assert.True(t, rep.OK(), "violations: %v", rep.Violations)
	assert.Zero(t, rep.Kills)
	assert.Equal(t, 3, rep.Started)
	assert.GreaterOrEqual(t, rep.Operations, 500)
	assert.Zero(t, rep.Cut, "no kill, no call cut short")
	assert.Less(t, time.Since(start), time.Minute, "MaxOps stopped the run before Duration")
}

func TestRunRefusesABadConfig(t *testing.T) {
	for _, cfg := range []stress.Config{
		{},
		{Dir: t.TempDir(), Processes: stress.MaxProcesses + 1},
		{Dir: t.TempDir(), Processes: -1},
		{Dir: t.TempDir(), MaxOps: -1},
		{Dir: t.TempDir(), Duration: -time.Second},
	} {
		_, err := stress.Run(t.Context(), cfg)
		assert.ErrorIs(t, err, stress.ErrConfig, "%+v", cfg)
	}
}
