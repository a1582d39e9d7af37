package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHelpIsNoError(t *testing.T) {
	var out, errs bytes.Buffer
	assert.Equal(t, exitPass, run(t.Context(), []string{"-h"}, &out, &errs))
	assert.Contains(t, errs.String(), "usage: statestress")
	assert.Contains(t, errs.String(), "0 pass, 1 violation, 2 bad flags")
	assert.NotContains(t, errs.String(), "(default 5m0s) (default", "one default per flag")
	assert.Regexp(t, `-seed uint\n\s+seed of the workload and kill schedule \(default: from the clock; the report names it\)\n`, errs.String(),
		"no random number shown as the default")
}

// TestRefusedRunLeavesNoDirectory: flags the run refuses leave nothing
// under -dir (each left an empty statestress-* directory), and no line
// saying a run started.
func TestRefusedRunLeavesNoDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-duration", "25h"},
		{"-check-timeout", "-1s"},
		{"-redis-url", "ftp://127.0.0.1/"},
	} {
		var out, errs bytes.Buffer
		assert.Equal(t, exitUsage, run(t.Context(), append(args, "-dir", dir), &out, &errs), "%q", args)
		assert.NotContains(t, errs.String(), "processes of", "%q: no run started", args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// unfinished is a run that fails quickly: it cannot do its work in its
// second.
var unfinished = []string{"-procs", "2", "-until-calls", "1000000", "-duration", "1s", "-kill-every", "0", "-seed", "3"}

func TestFailedRunSaysHowToRunItAgain(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := run(t.Context(), append(unfinished, "-dir", dir, "-v"), &out, &errs)
	require.Equal(t, exitViolation, code, out.String()+errs.String())
	assert.Contains(t, out.String(), "verdict:     FAIL\n")
	assert.Contains(t, out.String(), "\nrerun:       statestress -seed 3 -duration 1s -kill-every 0s -procs 2 -until-calls 1000000\n")
	assert.Regexp(t, `\nfiles:       `+dir+`/statestress-\d+\n$`, out.String(), "the failed run's files are kept, and it says where")
}

// TestStartLineNamesTheSeedAndTheRerun: the line printed as the run starts
// names the seed and the command line, so a run killed before its report
// (a CI timeout during a long check) can still be run again.
func TestStartLineNamesTheSeedAndTheRerun(t *testing.T) {
	var out, errs bytes.Buffer
	code := run(t.Context(), []string{"-procs", "2", "-until-calls", "300", "-kill-every", "0", "-dir", t.TempDir()}, &out, &errs)
	require.Equal(t, exitPass, code, out.String()+errs.String())
	first, _, _ := strings.Cut(errs.String(), "\n")
	assert.Regexp(t, `^statestress: seed \d+: 2 processes .*; rerun: statestress -seed \d+ -kill-every 0s -procs 2 -until-calls 300$`, first)
	// It says what the run waits for, not the counts it was not asked.
	assert.Contains(t, first, " until 300 calls (cap ")
	assert.Contains(t, out.String(), "; asked for 300 calls\n")
}

// TestRerunLineHidesTheRedisPassword: the start line's command line, for
// a CI log, holds no password of -redis-url in any of its forms (a lone
// user name is redis-cli's password); the server is not there, so the
// run ends at once and says so, without the password either. A password
// holding an unescaped '/' is refused before the run starts, and the
// refusal does not repeat it.
func TestRerunLineHidesTheRedisPassword(t *testing.T) {
	port, err := redistest.FreePort()
	require.NoError(t, err)
	for _, form := range []struct{ url, first string }{
		{"redis://s3cretpw@127.0.0.1:%d/0", "; rerun: statestress -seed 5 -kill-every 0s -procs 2 -redis-url redis://xxxxx@127.0.0.1:%d/0 -until-calls 300"},
		{"redis://127.0.0.1:%d/0?password=s3cretpw", "; rerun: statestress -seed 5 -kill-every 0s -procs 2 -redis-url 'redis://127.0.0.1:%d/0?password=xxxxx' -until-calls 300"},
		{"redis://u:s3cret/pw@127.0.0.1:%d/0", "statestress: stress: bad config: Redis.URL redis://u:xxxxx@127.0.0.1:%d/0: the user name or password holds a character"},
	} {
		url := fmt.Sprintf(form.url, port)
		var out, errs bytes.Buffer
		code := run(t.Context(), []string{"-redis-url", url, "-procs", "2", "-until-calls", "300", "-kill-every", "0", "-seed", "5", "-dir", t.TempDir()}, &out, &errs)
		assert.Equal(t, exitUsage, code, "%s: %s%s", url, out.String(), errs.String())
		first, _, _ := strings.Cut(errs.String(), "\n")
		assert.Contains(t, first, fmt.Sprintf(form.first, port), url)
		assert.NotContains(t, out.String()+errs.String(), "s3cret", url)
	}
}

// TestInterruptedRunSaysWhatRan: an interrupted run stops its workers,
// checks what they did and reports it; it exits 2, neither a pass nor a
// violation (its short run is the interruption's). Before, it printed
// "resource integrity_check: context canceled" and nothing of the run.
func TestInterruptedRunSaysWhatRan(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, args := range [][]string{
		{"-procs", "2", "-kill-every", "0", "-seed", "4"},
		{"-procs", "2", "-until-calls", "300", "-kill-every", "0", "-seed", "4"},
	} {
		var out, errs bytes.Buffer
		code := run(ctx, append(args, "-dir", t.TempDir()), &out, &errs)
		assert.Equal(t, exitUsage, code, "%q: %s%s", args, out.String(), errs.String())
		assert.Contains(t, out.String(), "stopped because it was interrupted")
		assert.Contains(t, out.String(), "\ninterrupted: after ")
		assert.Contains(t, out.String(), "\nrerun:       statestress -seed 4 ")
		assert.NotContains(t, errs.String(), "context canceled")
	}
}

// fullWriter fails every write, as stdout on a full disk does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestUnwrittenReportIsNotASuccess: a report stdout cannot take goes to
// stderr, and a run that passed exits 2, as its report is not where it
// was asked for; before, it exited 2 saying nothing at all, and a failed
// run's violations were lost.
func TestUnwrittenReportIsNotASuccess(t *testing.T) {
	var errs bytes.Buffer
	code := run(t.Context(), []string{"-procs", "2", "-until-calls", "300", "-kill-every", "0", "-seed", "3", "-dir", t.TempDir()}, fullWriter{}, &errs)
	assert.Equal(t, exitUsage, code, errs.String())
	assert.Contains(t, errs.String(), "the report could not be written: no space left on device")
	assert.Contains(t, errs.String(), "verdict:     PASS")

	errs.Reset()
	code = run(t.Context(), append(unfinished, "-dir", t.TempDir()), fullWriter{}, &errs)
	assert.Equal(t, exitViolation, code, "a violation stays a violation")
	assert.Contains(t, errs.String(), "verdict:     FAIL")
	assert.Contains(t, errs.String(), "rerun:       statestress -seed 3 ")
}

// TestClosedStdoutIsNotASuccess: a report written to a pipe whose reader
// is gone (statestress | head -1, a CI log collector that died) goes to
// stderr, and the run exits as a run whose report was not written; before,
// SIGPIPE killed statestress as it wrote, losing the verdict, and left the
// run's directory unnamed.
func TestClosedStdoutIsNotASuccess(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	require.NoError(t, r.Close()) // no reader: a write gets EPIPE, or SIGPIPE
	cmd := exec.Command(exe, "-procs", "2", "-until-calls", "300", "-kill-every", "0", "-seed", "3", "-dir", t.TempDir())
	cmd.Env = append(os.Environ(), asMain+"=1")
	cmd.Stdout = w
	var errs bytes.Buffer
	cmd.Stderr = &errs
	err = cmd.Run()
	w.Close()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, errs.String())
	assert.Equal(t, exitUsage, exit.ExitCode(), "%v: %s", exit, errs.String())
	assert.Contains(t, errs.String(), "the report could not be written: write /dev/stdout: broken pipe")
	assert.Contains(t, errs.String(), "verdict:     PASS")
}

// TestCheckLimitEndsTheCheckWithExitTwo: -check-limit bounds the whole
// linearizability check, where -check-timeout bounds each partition (a 3 s
// run once checked for more than 10 minutes, partition after partition).
// A check that reaches it says how far it got, runs the other checks, and
// exits 2: the run did not finish, and found nothing.
func TestCheckLimitEndsTheCheckWithExitTwo(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := run(t.Context(), []string{"-procs", "2", "-until-calls", "300", "-kill-every", "0", "-seed", "3",
		"-check-limit", "1ns", "-dir", dir}, &out, &errs)
	assert.Equal(t, exitUsage, code, "%s\n%s", out.String(), errs.String())
	assert.Contains(t, out.String(), "stopped because it had done the work asked")
	assert.Contains(t, out.String(), "check-limit: the linearizability check reached its limit of 1ns with epoch 0 and ")
	assert.Contains(t, out.String(), "\ncheck limit: the check stopped at -check-limit 1ns; what it checked passed, but it did not finish\n")
	assert.Contains(t, out.String(), "\nrerun:       statestress -seed 3 -check-limit 1ns ")

	out.Reset()
	errs.Reset()
	assert.Equal(t, exitUsage, run(t.Context(), []string{"-check-limit", "-1s", "-dir", dir}, &out, &errs))
	assert.Contains(t, errs.String(), "CheckLimit")
}
