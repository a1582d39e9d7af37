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

// testCap bounds a test run's wall time. It is generous: a run stops as
// soon as it has done its work, and reaching the cap first fails the test
// with what was done, so a slow machine makes a test slow, never wrong.
const testCap = 5 * time.Minute

// short is the run make test covers: small, but with real kills, and run
// until it has done enough of each thing the checks look at.
func short(t *testing.T) stress.Config {
	return stress.Config{
		Dir:        t.TempDir(),
		Processes:  3,
		Duration:   testCap,
		Until:      stress.Work{Calls: 3000, Kills: 10, Grants: 50, Contended: 10, Swept: 5},
		KillEvery:  150 * time.Millisecond,
		EpochEvery: time.Second, // keys idle after their epoch expire and are swept
		Seed:       1,
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

// assertClean asserts that a run did its work and found nothing.
func assertClean(t *testing.T, rep *stress.Report) {
	t.Helper()
	assert.True(t, rep.OK(), "violations: %v", rep.Violations)
	assert.Equal(t, stress.StoppedWork, rep.Stopped)
	assert.Equal(t, rep.Processes+rep.Readers+rep.Kills, rep.Started, "each kill restarted its worker")
	assert.Positive(t, rep.Fenced)
	assert.Positive(t, rep.Flushes, "buffered increments were flushed")
	assert.Positive(t, rep.Sweeps, "recorded sweeps deleted keys")
	assert.Positive(t, rep.Audits, "audits of a transfer pair answered")
	assert.Contains(t, rep.Linearizability, "Ok")
}

// TestShortStressRunFindsNothing also shows the read-only worker (a
// statectl beside the application) at work: its reads are in the checked
// history, and kills reach it. The kill schedule is the seed's: seed 1's
// ninth kill picks the reader's slot, and the run makes at least ten.
func TestShortStressRunFindsNothing(t *testing.T) {
	rep := run(t, short(t))
	assertClean(t, rep)
	assert.False(t, rep.StepClock)
	assert.Equal(t, stress.DefaultGoroutines, rep.Goroutines)
	assert.Equal(t, stress.DefaultReaders, rep.Readers)
	assert.Positive(t, rep.ReaderCalls, "the reader's calls are in the history")
	assert.Positive(t, rep.ReaderListings, "and its listings (statectl dump, leases)")
	assert.Less(t, rep.ReaderCalls, rep.Operations)
	assert.Positive(t, rep.ReaderKills, "a reader was killed and started again")
}

func TestShortStepClockRunFindsNothing(t *testing.T) {
	cfg := short(t)
	cfg.StepClock = true
	rep := run(t, cfg)
	assertClean(t, rep)
	assert.True(t, rep.StepClock)
	assert.Equal(t, 1, rep.Goroutines)
	assert.Zero(t, rep.Readers, "a stepped clock run has no reader")
	assert.Zero(t, rep.ReaderCalls)
}

// TestStressCatchesLeaseTwoStatements runs until enough grants contended
// with another process's: each is a moment the planted bug can hand one
// token to two holders.
func TestStressCatchesLeaseTwoStatements(t *testing.T) {
	cfg := short(t)
	cfg.Bugs = bugs.Set{}.With(bugs.LeaseTwoStatements)
	cfg.KillEvery = time.Second // the bug needs processes to interleave, not kills; a worker takes long to start under -race
	cfg.Until = stress.Work{Contended: 100}
	rep := run(t, cfg)
	assert.True(t, rep.Has(stress.KindDuplicateToken), "the planted bug hands one token to two holders, in %d contended grants: %v",
		rep.Done.Contended, rep.Violations)
	assert.True(t, rep.Has(stress.KindLinearizability))
	assert.False(t, rep.OK())
}

// TestStressCatchesReadIgnoresDeadline shows that on the real clock, with
// background sweeps, expiry is checked: a Get that returns an expired key
// is caught. Every expiry probe (one call in a hundred) reads a key that
// has certainly expired.
func TestStressCatchesReadIgnoresDeadline(t *testing.T) {
	cfg := short(t)
	cfg.Bugs = bugs.Set{}.With(bugs.ReadIgnoresDeadline)
	cfg.KillEvery = -1 // the bug needs no kill
	cfg.Until = stress.Work{Calls: 5000}
	rep := run(t, cfg)
	assert.False(t, rep.StepClock)
	assert.True(t, rep.Has(stress.KindLinearizability), "a read of an expired key, in %d calls: %v", rep.Done.Calls, rep.Violations)
}

func TestStressWithoutKillsStopsByWork(t *testing.T) {
	cfg := short(t)
	cfg.KillEvery = -1
	cfg.Until = stress.Work{Calls: 500}
	rep := run(t, cfg)
	assert.True(t, rep.OK(), "violations: %v", rep.Violations)
	assert.Equal(t, stress.StoppedWork, rep.Stopped)
	assert.Zero(t, rep.Kills)
	assert.Equal(t, 3+stress.DefaultReaders, rep.Started)
	assert.GreaterOrEqual(t, rep.Operations, 500)
	assert.Zero(t, rep.Cut, "no kill, no call cut short")
}

func TestARunThatReachesItsCapFails(t *testing.T) {
	cfg := short(t)
	cfg.Duration = time.Second
	cfg.Until = stress.Work{Calls: 1 << 40} // more than any machine makes in a second
	rep := run(t, cfg)
	assert.Equal(t, stress.StoppedCap, rep.Stopped)
	assert.True(t, rep.Has(stress.KindShortRun), "%v", rep.Violations)
	assert.False(t, rep.OK())
	assert.Contains(t, rep.Violations[len(rep.Violations)-1].Detail, "having done")
}

func TestRunRefusesABadConfig(t *testing.T) {
	for _, cfg := range []stress.Config{
		{},
		{Dir: t.TempDir(), Processes: stress.MaxProcesses + 1},
		{Dir: t.TempDir(), Processes: -1},
		{Dir: t.TempDir(), Goroutines: stress.MaxGoroutines + 1},
		{Dir: t.TempDir(), StepClock: true, Goroutines: 2},
		{Dir: t.TempDir(), MaxOps: -1},
		{Dir: t.TempDir(), Duration: -time.Second},
		{Dir: t.TempDir(), Until: stress.Work{Calls: -1}},
		{Dir: t.TempDir(), KillEvery: -1, Until: stress.Work{Kills: 1}},
		{Dir: t.TempDir(), Readers: stress.MaxReaders + 1},
	} {
		_, err := stress.Run(t.Context(), cfg)
		assert.ErrorIs(t, err, stress.ErrConfig, "%+v", cfg)
	}
}

// TestReadersOnlyOnAFileOnTheRealClock: a StepClock run and a Redis run
// have no reader by default, and refuse one, saying why; a negative
// Readers asks for none anywhere.
func TestReadersOnlyOnAFileOnTheRealClock(t *testing.T) {
	for _, c := range []struct {
		cfg  stress.Config
		want string
	}{
		{stress.Config{StepClock: true, Readers: 1}, "a StepClock run has none"},
		{stress.Config{Redis: &stress.Redis{}, Readers: 2}, "a Redis run has none"},
	} {
		err := c.cfg.Validate()
		assert.ErrorIs(t, err, stress.ErrConfig, "%+v", c.cfg)
		assert.ErrorContains(t, err, c.want)
	}
	for _, cfg := range []stress.Config{
		{StepClock: true},
		{Redis: &stress.Redis{}},
		{Readers: -1},
		{StepClock: true, Readers: -1},
		{Redis: &stress.Redis{}, Readers: -1},
	} {
		assert.NoError(t, cfg.Validate(), "%+v", cfg)
	}
}

// TestStressCatchesDelCountsExpired shows that a Del's count over several
// keys is checked on the real clock: every expiry probe (one call in a
// hundred) deletes its key, certainly expired, beside another key of its
// hash tag, which the check takes as one partition with it, and a Del that
// counts the expired row answers one where none is right.
func TestStressCatchesDelCountsExpired(t *testing.T) {
	cfg := short(t)
	cfg.Bugs = bugs.Set{}.With(bugs.DelCountsExpired)
	cfg.KillEvery = -1 // the bug needs no kill
	cfg.Until = stress.Work{Calls: 5000}
	rep := run(t, cfg)
	assert.True(t, rep.Has(stress.KindLinearizability), "a Del that counted an expired row, in %d calls: %v", rep.Done.Calls, rep.Violations)
}

// TestStressCatchesClaimBeforeLock shows that the check holds a worker's
// calls to the order in which its handle claimed their times: a verb that
// claims its time before it takes the handle's lock, and runs at it after
// another goroutine's verb ran at a later time, reads what that verb
// wrote at a time before it. Every check but this order passes it.
func TestStressCatchesClaimBeforeLock(t *testing.T) {
	cfg := short(t)
	cfg.Bugs = bugs.Set{}.With(bugs.ClaimBeforeLock)
	cfg.KillEvery = -1 // the bug needs no kill
	cfg.Until = stress.Work{Calls: 5000}
	rep := run(t, cfg)
	assert.True(t, rep.Has(stress.KindLinearizability), "a verb that ran at a time claimed before the lock, in %d calls: %v", rep.Done.Calls, rep.Violations)
}
