package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fullWriter fails every write, as /dev/full does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

func TestUnwrittenReportIsNotASuccess(t *testing.T) {
	var errOut bytes.Buffer
	code := run([]string{"-seed", "3", "-ops", "50"}, fullWriter{}, &errOut, nil)
	assert.Equal(t, exitUsage, code, "a passing run whose report was lost")
	assert.Contains(t, errOut.String(), "statesim: the report could not be written: no space left on device")

	errOut.Reset()
	code = run([]string{"-seeds", "2", "-ops", "50", "-parallel", "1"}, fullWriter{}, &errOut, nil)
	assert.Equal(t, exitUsage, code, "passing seeds whose summary was lost")
	assert.Contains(t, errOut.String(), "no space left on device")

	errOut.Reset()
	code = run([]string{"-seed", "1", "-ops", "300", "-bug", "read-ignores-deadline", "-html", t.TempDir()}, fullWriter{}, &errOut, nil)
	assert.Equal(t, exitViolation, code, "a violation stays a violation")
	assert.Contains(t, errOut.String(), "no space left on device")
	assert.Contains(t, errOut.String(), "replay: statesim -seed 1 -ops 300 -bug read-ignores-deadline -v")
}

// TestSummaryCountsInTheSingular reads one worker, one process start, one
// integrity check and one Del in the singular, and more in the plural.
func TestSummaryCountsInTheSingular(t *testing.T) {
	var out bytes.Buffer
	printSummary(&out, options{cfg: sim.DefaultConfig(1), parallel: 1}, &totals{seeds: 1, opens: 1, checks: 1, partialDels: 1}, time.Second)
	assert.Contains(t, out.String(), "; 1 worker; config: the defaults\n")
	assert.Contains(t, out.String(), "; 1 process start, 1 integrity check; 1 Del of the key group that counted some of their keys\n")

	out.Reset()
	printSummary(&out, options{cfg: sim.DefaultConfig(1), parallel: 2}, &totals{seeds: 2, opens: 2, checks: 2, partialDels: 2}, time.Second)
	assert.Contains(t, out.String(), "; 2 workers; ")
	assert.Contains(t, out.String(), "; 2 process starts, 2 integrity checks; 2 Dels of the key group that counted some of their keys\n")
}

// TestSummarySaysWhatFiredOnTheDisk: the summary sums the simulated
// disks' own counters over the seeds, so that a run says how many injected
// errors fired, not only how many were armed: failed directory syncs apart
// from failed syncs of files, and both apart from failed reads and writes.
func TestSummarySaysWhatFiredOnTheDisk(t *testing.T) {
	tot := &totals{faults: map[string]int{}}
	for _, d := range []faults.Stats{
		{InjectedErrors: 4, InjectedSyncErrors: 1, InjectedDirSyncErrors: 1, NoSpaceErrors: 1, PowerLosses: 1},
		{InjectedErrors: 3, InjectedSyncErrors: 2, InjectedDirSyncErrors: 1, PowerLosses: 2, Crashes: 1},
		{InjectedErrors: 1, InjectedDirSyncErrors: 1},
	} {
		tot.add(result{Stats: sim.Stats{Disk: d}})
	}
	var out bytes.Buffer
	printSummary(&out, options{cfg: sim.DefaultConfig(1), parallel: 1}, tot, time.Second)
	assert.Contains(t, out.String(), "fired on the disk: 2 failed reads or writes, 3 failed syncs, 3 failed directory syncs, 1 write refused for room, 3 power losses, 1 crash\n")
}

// TestClosedStdoutKeepsTheReplayLine: statesim -seeds ... | head -1 (or a
// CI log collector that died) writes to a pipe whose reader is gone. The
// report goes on on stderr, replay lines and all, and the run exits 1 for
// its failure; before, SIGPIPE killed statesim at its first write to
// stdout (exit 141), and the replay lines were lost.
func TestClosedStdoutKeepsTheReplayLine(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	require.NoError(t, r.Close()) // no reader: a write gets EPIPE, or SIGPIPE
	cmd := exec.Command(exe, "-seed", "1", "-ops", "300", "-bug", "read-ignores-deadline", "-html", t.TempDir())
	cmd.Env = append(os.Environ(), asStatesim+"=1")
	cmd.Stdout = w
	var errs bytes.Buffer
	cmd.Stderr = &errs
	err = cmd.Run()
	w.Close()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, errs.String())
	assert.Equal(t, exitViolation, exit.ExitCode(), "%v: %s", exit, errs.String())
	assert.Contains(t, errs.String(), "broken pipe")
	assert.Contains(t, errs.String(), "replay: statesim -seed 1 -ops 300 -bug read-ignores-deadline -v")
}
