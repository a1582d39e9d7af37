package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/sim"
)

// asStatesim makes the test binary act as statesim (main) when re-executed
// as a worker by -parallel, or by a test.
const asStatesim = "STATESIM_TEST_AS_MAIN"

// workerDies makes the test binary, re-executed as a worker, exit at once.
const workerDies = "STATESIM_TEST_WORKER_DIES"

// workerHangs makes the test binary, re-executed as a worker, print its
// pid on stderr and run until it is killed, as a worker in a long seed
// does: one that would not see its input end.
const workerHangs = "STATESIM_TEST_WORKER_HANGS"

func TestMain(m *testing.M) {
	if os.Getenv(workerHangs) != "" && slices.Contains(os.Args[1:], "-worker") {
		fmt.Fprintf(os.Stderr, "worker pid %d\n", os.Getpid())
		for {
			time.Sleep(time.Hour)
		}
	}
	if os.Getenv(workerDies) != "" {
		os.Exit(3)
	}
	if os.Getenv(asStatesim) != "" {
		main()
	}
	os.Exit(m.Run())
}

// statesim runs the command with args and returns its exit status and
// output.
func statesim(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut, nil)
	return code, out.String(), errOut.String()
}

var traceLine = regexp.MustCompile(`trace: [0-9a-f]{32}`)

func TestOneSeedPasses(t *testing.T) {
	code, out, _ := statesim(t, "-seed", "3", "-ops", "100")
	assert.Equal(t, exitOK, code, out)
	assert.Regexp(t, traceLine, out)
	assert.Regexp(t, `check: slowest partition [gkl]:\S+ took [1-9][0-9.]*(µs|ms|s) \(limit 1m0s\)`, out)
}

func TestSameSeedSameTraceLine(t *testing.T) {
	_, a, _ := statesim(t, "-seed", "5", "-ops", "150")
	_, b, _ := statesim(t, "-seed", "5", "-ops", "150")
	require.Regexp(t, traceLine, a)
	assert.Equal(t, traceLine.FindString(a), traceLine.FindString(b))
}

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"-nope"}, {"-procs", "9"}, {"-bug", "no-such-bug"}, {"-seeds", "-1"}, {"-powerloss", "2"}, {"-seed", "1", "extra"},
	} {
		code, _, errOut := statesim(t, args...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, errOut)
	}
}

func TestPlantedBugExits1WithReplayAndHTML(t *testing.T) {
	dir := t.TempDir()
	// Seed 2: seed 1 stopped catching it when the recipe workload joined the
	// default run and moved its schedule (5 of seeds 2..6 catch it).
	code, out, _ := statesim(t, "-seed", "2", "-bug", "read-ignores-deadline", "-html", dir)
	require.Equal(t, exitViolation, code, out)
	assert.Contains(t, out, "--- check linearizability")
	assert.Contains(t, out, "replay: statesim -seed 2 -bug read-ignores-deadline")
	html := filepath.Join(dir, "statesim-2.html")
	assert.Contains(t, out, html)
	assert.FileExists(t, html)
}

func TestShrinkFindsASmallerRun(t *testing.T) {
	code, out, _ := statesim(t, "-seed", "1", "-bug", "no-hwm", "-shrink", "-shrink-runs", "12", "-html", t.TempDir())
	require.Equal(t, exitViolation, code, out)
	m := regexp.MustCompile(`shrunk \((\d+) ops, clock\): (statesim -seed 1 -ops (\d+).*)`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	ops, err := strconv.Atoi(m[3])
	require.NoError(t, err)
	assert.Equal(t, m[1], m[3], "the count printed is the line's")
	assert.Less(t, ops, sim.DefaultOps, "shrunk to no fewer operations")
	// The line it prints must fail the same way.
	cfg, err := sim.ParseReplay(m[2])
	require.NoError(t, err)
	rep, err := sim.Run(cfg)
	require.NoError(t, err)
	assert.Contains(t, rep.Checks(), sim.CheckClock, "the shrunk run does not fail the clock check: %s", m[2])
}

func TestManySeedsInWorkersMatchOneByOne(t *testing.T) {
	t.Setenv(asStatesim, "1") // the workers are this test binary
	code, par, errOut := statesim(t, "-seeds", "4", "-from", "20", "-ops", "80", "-parallel", "2")
	require.Equal(t, exitOK, code, par+errOut)
	code, seq, _ := statesim(t, "-seeds", "4", "-from", "20", "-ops", "80", "-parallel", "1", "-v")
	require.Equal(t, exitOK, code)
	assert.Contains(t, par, "seeds: 4 run (20..23), 0 failed; 2 workers")
	assert.Contains(t, par, "simulated ops/s")
	// The workers send each seed's slowest check back with its result.
	assert.Regexp(t, `check: slowest partition [gkl]:\S+ of seed 2[0-3] took [1-9][0-9.]*(µs|ms|s) \(limit 1m0s, per partition\)`, par)
	assert.Contains(t, errOut, "4/4 seeds, 0 failed")

	// -v prints each seed's summary line: the same traces as the workers'.
	var traces []string
	for _, line := range strings.Split(seq, "\n") {
		if strings.HasPrefix(line, "seed ") {
			traces = append(traces, traceLine.FindString(line))
		}
	}
	require.Len(t, traces, 4)
	_, one, _ := statesim(t, "-seed", "22", "-ops", "80")
	assert.Equal(t, traces[2], traceLine.FindString(one))

	// The workers' own traces, which the summary does not print: each
	// seed's, from another process (the second seed of a worker after its
	// first), is the one this process computed.
	opt, err := parse([]string{"-seeds", "4", "-from", "20", "-ops", "80", "-parallel", "2"}, io.Discard)
	require.NoError(t, err)
	byWorker := map[uint64]string{}
	sent, lost, err := runParallel(opt, nil, func(r result) bool {
		byWorker[r.Seed] = "trace: " + r.Trace
		return true
	})
	require.NoError(t, err)
	require.Equal(t, 4, sent)
	require.Empty(t, lost)
	for i, trace := range traces {
		assert.Equal(t, trace, byWorker[20+uint64(i)], "seed %d: a worker's trace is not this process's", 20+i)
	}
}

func TestManySeedsStopAtTheFirstFailure(t *testing.T) {
	t.Setenv(asStatesim, "1")
	code, out, _ := statesim(t, "-seeds", "50", "-bug", "read-ignores-deadline", "-parallel", "2", "-html", t.TempDir())
	require.Equal(t, exitViolation, code, out)
	assert.Contains(t, out, "FAIL seed ")
	assert.NotContains(t, out, "seeds: 50 run", "it should stop early")
}

// TestKeepGoingGivesEveryFailureItsReplayLine: with -keep-going the first
// failure is printed in full and every other one gets the line that
// replays it, so each can be reproduced without working out its flags.
func TestKeepGoingGivesEveryFailureItsReplayLine(t *testing.T) {
	code, out, _ := statesim(t, "-seeds", "6", "-from", "2", "-ops", "300", "-bug", "read-ignores-deadline",
		"-keep-going", "-parallel", "1", "-html", t.TempDir())
	require.Equal(t, exitViolation, code, out)
	first := regexp.MustCompile(`FAIL seed (\d+)`).FindStringSubmatch(out)
	require.NotNil(t, first, out)
	others := regexp.MustCompile(`(?m)^  seed (\d+) \(\S+\): replay: statesim -seed (\d+) -ops 300 -bug read-ignores-deadline -v$`).FindAllStringSubmatch(out, -1)
	require.NotEmpty(t, others, "more than one of seeds 2..7 fails: %s", out)
	assert.Contains(t, out, fmt.Sprintf("other failing seeds (%d):", len(others)))
	for _, m := range others {
		assert.Equal(t, m[1], m[2], "the replay line is the seed's own")
		assert.NotEqual(t, first[1], m[1])
	}
}

func TestTheLastSeedRuns(t *testing.T) {
	code, out, errOut := statesim(t, "-seeds", "1", "-from", "18446744073709551615", "-ops", "20", "-parallel", "1")
	require.Equal(t, exitOK, code, out+errOut)
	assert.Contains(t, out, "seeds: 1 run (18446744073709551615..18446744073709551615)")
	code, _, errOut = statesim(t, "-seeds", "2", "-from", "18446744073709551615")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "past the last seed")
}

func TestHugeSeedCountStopsAtItsFirstFailure(t *testing.T) {
	// 2^40 seeds: a list of them would not fit in memory.
	code, out, _ := statesim(t, "-seeds", "1099511627776", "-ops", "300", "-bug", "read-ignores-deadline", "-parallel", "1", "-html", t.TempDir())
	require.Equal(t, exitViolation, code, out)
	assert.Contains(t, out, "seeds: 1 run (1..1), 1 failed")
}

// TestWorkerFailureExits2NamingTheSeed: a worker that dies at once is
// found either sending it its first seed (a broken pipe) or reading the
// result; both name the seed alike.
func TestWorkerFailureExits2NamingTheSeed(t *testing.T) {
	t.Setenv(workerDies, "1")
	code, out, errOut := statesim(t, "-seeds", "4", "-from", "20", "-ops", "50", "-parallel", "2")
	assert.Equal(t, exitUsage, code, out+errOut)
	assert.Regexp(t, `statesim: worker: seed 2[01]: unexpected EOF`, errOut)
}

func TestSeedFlagsThatWouldBeIgnoredAreRefused(t *testing.T) {
	// -seeds runs from -from: a -seed beside it would be dropped unseen.
	code, out, errOut := statesim(t, "-seeds", "3", "-seed", "7000000", "-ops", "20")
	assert.Equal(t, exitUsage, code, out)
	assert.Contains(t, errOut, "-seed with -seeds: the seeds start at -from")
	// -from alone would run seed 1.
	code, out, errOut = statesim(t, "-from", "7000000", "-ops", "20")
	assert.Equal(t, exitUsage, code, out)
	assert.Contains(t, errOut, "-from without -seeds")
	// One seed neither keeps going nor runs in workers.
	code, out, errOut = statesim(t, "-seed", "7000000", "-keep-going", "-ops", "20")
	assert.Equal(t, exitUsage, code, out)
	assert.Contains(t, errOut, "-keep-going without -seeds")
	code, out, errOut = statesim(t, "-seed", "7000000", "-parallel", "2", "-ops", "20")
	assert.Equal(t, exitUsage, code, out)
	assert.Contains(t, errOut, "-parallel without -seeds")
}

func TestNoMoreWorkersThanSeeds(t *testing.T) {
	t.Setenv(asStatesim, "1")
	code, out, errOut := statesim(t, "-seeds", "2", "-from", "20", "-ops", "50", "-parallel", "16")
	require.Equal(t, exitOK, code, out+errOut)
	assert.Contains(t, out, "seeds: 2 run (20..21), 0 failed; 2 workers")
}
