package sim

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// foreignConfig is a run with the foreign program drawn often, and
// statectl visits often enough to meet the write it leaves hot.
func foreignConfig(seed uint64) Config {
	cfg := DefaultConfig(seed)
	cfg.Rates.Foreign = 0.2
	cfg.Rates.Inspect = 0.1
	return cfg
}

// TestForeignProgramChangesNothing: plain SQLite switches the file to
// rollback mode while no process has it open, and is killed in a write
// with changed pages spilled into the file, or the power goes under it.
// Every history stays linearizable: the writable Opens after it roll the
// write back and put the file back in WAL mode, and read-only Opens are
// refused with ErrUnfinishedWrite only until one has. The runs must reach
// each of these.
func TestForeignProgramChangesNothing(t *testing.T) {
	var trace strings.Builder
	for seed := uint64(1); seed <= 12; seed++ {
		cfg := foreignConfig(seed)
		cfg.Trace = &trace
		r, err := Run(cfg)
		require.NoError(t, err)
		require.True(t, r.OK(), "seed %d: %v", seed, r.Violations)
	}
	for what, re := range map[string]string{
		"switch to rollback mode":             `sqlite3\) done, the file in rollback mode: ok`,
		"kill before the commit":              `sqlite3\) killed before its commit`,
		"power cut under it":                  `armed at mutating call \d+, as sqlite3 runs`,
		"read-only open refused by its write": `open: a write outside the WAL not rolled back yet`,
	} {
		require.Regexp(t, regexp.MustCompile(re), trace.String(), "no run reached: %s", what)
	}
}

// TestForeignCommitIsCaught: a foreign program that commits its write
// changes every key's value and deletes the leases; the checks must say so.
func TestForeignCommitIsCaught(t *testing.T) {
	foreignCommits = true
	t.Cleanup(func() { foreignCommits = false })
	for seed := uint64(1); seed <= 12; seed++ {
		r, err := Run(foreignConfig(seed))
		require.NoError(t, err)
		if !r.OK() {
			return
		}
	}
	t.Fatal("a foreign program's committed write went unseen in 12 seeds")
}
