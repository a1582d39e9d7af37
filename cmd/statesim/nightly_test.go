package main

import (
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/sim"
)

// nightlyFile is the nightly simulation workflow, from this package.
const nightlyFile = "../../.github/workflows/nightly.yml"

// nightlyRuns returns the statesim command lines of the nightly workflow,
// continuation lines joined, with the shell's values put in: the default
// seed count for the chosen one, a seed for each start, the named bug for
// the canary loop's, with the flags the loop adds for it.
func nightlyRuns(t *testing.T, text, bug string) [][]string {
	t.Helper()
	text = strings.ReplaceAll(text, "\\\n", " ")
	seeds := regexp.MustCompile(`: "\$\{seeds:=(\d+)\}"`).FindStringSubmatch(text)
	require.NotNil(t, seeds, "%s: no default seed count", nightlyFile)
	// The canary loop's flags for one bug: if [ "$bug" = NAME ]; then extra=FLAGS; fi
	extra := ""
	for _, m := range regexp.MustCompile(`if \[ "\$bug" = (\S+) \]; then extra=(\S+); fi`).FindAllStringSubmatch(text, -1) {
		if m[1] == bug {
			extra = m[2]
		}
	}
	values := strings.NewReplacer(
		`"${{ steps.seeds.outputs.seeds }}"`, seeds[1],
		`"${{ steps.seeds.outputs.from }}"`, "1000000",
		`"$from"`, "1500000",
		`"$(nproc)"`, "2",
		`"$bug"`, bug,
		`$extra`, extra,
	)
	var runs [][]string
	for _, line := range strings.Split(text, "\n") {
		_, cmd, ok := strings.Cut(line, "./statesim ")
		if !ok {
			continue
		}
		cmd, _, _ = strings.Cut(cmd, "2>&1")
		cmd, _, _ = strings.Cut(cmd, ">")
		args := strings.Fields(values.Replace(cmd))
		for _, a := range args {
			require.NotContains(t, a, "$", "%s: a shell value the test does not know: %s", nightlyFile, line)
		}
		runs = append(runs, args)
	}
	return runs
}

// TestNightlyRunsWhatTheREADMESays: the nightly workflow's statesim
// commands parse with statesim's own flags (a renamed flag would otherwise
// fail only at night), run the configurations README.md names, and its
// canary loop runs every planted bug, sync-full-unsynced with -syncfull;
// a failing run skips none of the others, and the failure's output is kept.
func TestNightlyRunsWhatTheREADMESays(t *testing.T) {
	b, err := os.ReadFile(nightlyFile)
	require.NoError(t, err)
	text := string(b)

	type run struct {
		seeds      int
		goroutines int
		diskFull   float64
		syncFull   bool
		inspect    float64
		foreign    float64
		syncError  float64
	}
	var sims []run
	for _, args := range nightlyRuns(t, text, "") {
		if slices.Contains(args, "-bug") {
			continue
		}
		opt, err := parse(args, io.Discard)
		require.NoError(t, err, "%s: statesim %s", nightlyFile, strings.Join(args, " "))
		assert.True(t, opt.keepGoing && opt.shrink, "a nightly run keeps going and shrinks: %v", args)
		sims = append(sims, run{opt.seeds, opt.cfg.Goroutines, opt.cfg.Rates.DiskFull, opt.cfg.SyncFull, opt.cfg.Rates.Inspect, opt.cfg.Rates.Foreign, opt.cfg.Rates.SyncError})
	}
	d := sim.DefaultConfig(1)
	assert.ElementsMatch(t, []run{
		{20000, d.Goroutines, d.Rates.DiskFull, false, d.Rates.Inspect, 0, d.Rates.SyncError},
		{5000, 8, d.Rates.DiskFull, false, d.Rates.Inspect, 0, d.Rates.SyncError},
		{3000, d.Goroutines, 0.03, false, d.Rates.Inspect, 0, d.Rates.SyncError},
		{3000, d.Goroutines, d.Rates.DiskFull, true, d.Rates.Inspect, 0, d.Rates.SyncError},
		{2000, 8, d.Rates.DiskFull, false, d.Rates.Inspect, 0, 0.03},
		{3000, d.Goroutines, d.Rates.DiskFull, false, 0.1, 0, d.Rates.SyncError},
		{3000, d.Goroutines, d.Rates.DiskFull, false, d.Rates.Inspect, 0.02, d.Rates.SyncError},
	}, sims, "the nightly runs README.md describes")

	loop := regexp.MustCompile(`for bug in ([^;]+); do`).FindStringSubmatch(strings.ReplaceAll(text, "\\\n", " "))
	require.NotNil(t, loop, "%s: no canary loop", nightlyFile)
	listed := strings.Fields(loop[1])
	slices.Sort(listed)
	assert.Equal(t, bugs.Names(), listed, "the nightly canary loop must run every planted bug once")
	for _, name := range listed {
		found := false
		for _, args := range nightlyRuns(t, text, name) {
			if !slices.Contains(args, "-bug") {
				continue
			}
			found = true
			opt, err := parse(args, io.Discard)
			require.NoError(t, err, "%s: statesim %s", nightlyFile, strings.Join(args, " "))
			bug, err := bugs.Parse(name)
			require.NoError(t, err)
			assert.True(t, opt.cfg.Bugs.Has(bug), "%v", args)
			assert.Equal(t, 200, opt.seeds, "statesim catches every canary within 200 seeds: %v", args)
			assert.Equal(t, name == bugs.SyncFullUnsynced.String(), opt.cfg.SyncFull, "%v", args)
		}
		assert.True(t, found, "%s: no statesim -bug in the canary loop", nightlyFile)
	}

	// A step runs only when every step before it passed, unless it says
	// otherwise: a failing seed in the first run must not skip the other
	// runs and the canaries that night.
	steps := strings.Split(text, "\n      - name: ")
	first := true
	for _, step := range steps[1:] {
		if !strings.Contains(step, "./statesim ") {
			continue
		}
		name, _, _ := strings.Cut(step, "\n")
		if first {
			first = false
			continue
		}
		assert.Contains(t, step, "if: ${{ !cancelled() && steps.seeds.outcome == 'success' }}",
			"%s: step %q is skipped when a run before it fails", nightlyFile, name)
	}
	assert.False(t, first, "%s: no step runs statesim", nightlyFile)
	last := steps[len(steps)-1]
	assert.True(t, strings.HasPrefix(last, "Keep the failure\n") && strings.Contains(last, "if: failure()"),
		"%s: the step that keeps a failure's output must come last, after the canaries", nightlyFile)
}
