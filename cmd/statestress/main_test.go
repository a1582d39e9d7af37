package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statekit/statekit/stress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// asMain makes the test binary act as statestress (main) when a test
// starts it.
const asMain = "STATESTRESS_TEST_AS_MAIN"

// TestMain lets a run started by a test re-execute this binary as its
// workers.
func TestMain(m *testing.M) {
	if os.Getenv(asMain) != "" {
		main()
	}
	stress.WorkerMain()
	os.Exit(m.Run())
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-bug", "no-such-bug"},
		{"-procs", "0", "-dir", t.TempDir()},
		{"-procs", "1000", "-dir", t.TempDir()},
		{"-duration", "-1s", "-dir", t.TempDir()},
		{"-epoch", "0", "-dir", t.TempDir()},
		{"-goroutines", "0", "-dir", t.TempDir()},
		{"-step-clock", "-goroutines", "4", "-dir", t.TempDir()},
		{"-until-calls", "-1", "-dir", t.TempDir()},
		{"-until-kills", "1", "-kill-every", "0", "-dir", t.TempDir()},
		{"-nope"},
		{"extra"},
		{"-expect", "duplicate-tokens", "-dir", t.TempDir()},                  // a typo: no run can pass
		{"-redis", "-until-swept", "1", "-dir", t.TempDir()},                  // Redis records no sweep
		{"-procs", "1", "-until-contended", "1", "-dir", t.TempDir()},         // contended between processes
		{"-until-calls", "2000000", "-dir", t.TempDir()},                      // past -ops' default
		{"-duration", "25h", "-dir", t.TempDir()},                             // past stress.MaxDuration
		{"-check-timeout", "-1s", "-dir", t.TempDir()},                        //
		{"-redis-url", "http://127.0.0.1:1/", "-dir", t.TempDir()},            // not a Redis URL
		{"-redis-url", "redis://127.0.0.1:1/0", "-step-clock", "-dir", "/nx"}, // file only
		{"-readers", "-1", "-dir", t.TempDir()},                               //
		{"-readers", "65", "-dir", t.TempDir()},                               // past stress.MaxReaders
		{"-readers", "1", "-step-clock", "-dir", t.TempDir()},                 // readers read on the real clock
		{"-readers", "1", "-redis", "-dir", t.TempDir()},                      // and open a file
		{"-readers", "2", "-redis-url", "redis://127.0.0.1:1/0"},              //
	} {
		var out, errs bytes.Buffer
		assert.Equal(t, 2, run(t.Context(), args, &out, &errs), "%q: %s", args, errs.String())
		assert.NotEmpty(t, errs.String(), "%q says why", args)
		assert.Empty(t, out.String())
	}
}

func TestRunStopsOnWorkAndExpects(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := run(t.Context(), []string{"-procs", "2", "-until-calls", "300", "-kill-every", "0", "-seed", "3", "-dir", dir}, &out, &errs)
	assert.Equal(t, 0, code, "%s\n%s", out.String(), errs.String())
	assert.Contains(t, out.String(), "stopped because it had done the work asked")
	assert.Contains(t, out.String(), "verdict:     PASS")
	assert.Contains(t, out.String(), "processes:   2 at once and 1 read-only of ", "a reader by default")
	assert.Regexp(t, ` by read-only workers \(\d+ listings\), `, out.String())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a run that passed leaves no files")
	assert.NotContains(t, out.String(), "files:")

	// -keep keeps them, and says where.
	out.Reset()
	errs.Reset()
	code = run(t.Context(), []string{"-procs", "2", "-step-clock", "-until-calls", "300", "-kill-every", "0", "-seed", "3", "-keep", "-dir", dir}, &out, &errs)
	assert.Equal(t, 0, code, "%s\n%s", out.String(), errs.String())
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "-keep")
	assert.Contains(t, out.String(), "files:       "+filepath.Join(dir, entries[0].Name())+"\n")
	require.NoError(t, os.RemoveAll(filepath.Join(dir, entries[0].Name())))

	// -expect fails a run that does not find what it expects.
	out.Reset()
	errs.Reset()
	code = run(t.Context(), []string{"-procs", "2", "-step-clock", "-until-calls", "300", "-kill-every", "0", "-seed", "3",
		"-expect", "duplicate-token", "-dir", dir}, &out, &errs)
	assert.Equal(t, 1, code, "%s\n%s", out.String(), errs.String())
	assert.True(t, strings.Contains(out.String(), "the check missed the planted bug"), out.String())
}

// TestExpectedViolationKeepsItsView: a run that passes because it found
// the violation -expect asked for keeps its files when its report names
// one (porcupine's view of the failing partition), and says where they
// are; before, the report named a file in a directory it then removed.
func TestExpectedViolationKeepsItsView(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := run(t.Context(), []string{"-procs", "2", "-until-calls", "5000", "-kill-every", "0", "-seed", "4",
		"-bug", "read-ignores-deadline", "-expect", "linearizability", "-dir", dir}, &out, &errs)
	require.Equal(t, exitPass, code, "%s\n%s", out.String(), errs.String())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the run's files are kept")
	html := filepath.Join(dir, entries[0].Name(), "linearizability.html")
	assert.Contains(t, out.String(), "failing partition: "+html+"\n")
	assert.FileExists(t, html)
	assert.Contains(t, out.String(), "files:       "+filepath.Join(dir, entries[0].Name())+"\n")
}

// TestReadersZeroRunsNone: -readers 0 runs no read-only worker, and the
// rerun line keeps it; -step-clock alone runs none and is no bad flag.
func TestReadersZeroRunsNone(t *testing.T) {
	var out, errs bytes.Buffer
	code := run(t.Context(), []string{"-procs", "2", "-readers", "0", "-until-calls", "300", "-kill-every", "0", "-seed", "3", "-dir", t.TempDir()}, &out, &errs)
	assert.Equal(t, exitPass, code, "%s\n%s", out.String(), errs.String())
	assert.Contains(t, out.String(), "processes:   2 at once of ")
	assert.NotContains(t, out.String(), "read-only")
	assert.Contains(t, errs.String(), "; rerun: statestress -seed 3 -kill-every 0s -procs 2 -readers 0 -until-calls 300\n")
}
