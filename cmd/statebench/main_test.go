package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommandLinesThatWouldRunForNothingAreRefused: stray arguments (a
// -run pattern the shell split) and a -run that matches no scenario are
// errors before anything runs or is written; before, the first started the
// full run, minutes long, and the second wrote an empty statebench.json
// over the last one's and exited 0. A -json beside no directory is
// refused up front too, not after the run.
func TestCommandLinesThatWouldRunForNothingAreRefused(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "statebench.json")
	require.NoError(t, os.WriteFile(report, []byte("the last run's"), 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-json", report, "incr", "get"}, `unexpected arguments ["incr" "get"]`},
		{[]string{"-json", report, "-run", "zzz"}, `-run "zzz" matches no scenario`},
		{[]string{"-json", report, "-run", "scale"}, `-run "scale" matches no scenario`},
		{[]string{"-json", filepath.Join(dir, "no", "such.json"), "-run", "^get$"}, "no such file or directory"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(append([]string{"-dir", dir}, c.args...), &stdout, &stderr)
		require.Error(t, err, "%q", c.args)
		assert.Contains(t, err.Error(), c.want, "%q", c.args)
		assert.Empty(t, stdout.String(), "%q", c.args)
	}
	b, err := os.ReadFile(report)
	require.NoError(t, err)
	assert.Equal(t, "the last run's", string(b), "nothing overwrote the last report")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no run made its files")
}

// failingWriter fails every write, as a pipe whose reader is gone does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestTableStdoutCannotTakeKeepsTheJSON: statebench | head: the JSON is
// written before the table, which goes to stderr when stdout fails, and
// the run says it could not write it; before, SIGPIPE killed statebench
// at the table, before the JSON.
func TestTableStdoutCannotTakeKeepsTheJSON(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "statebench.json")
	var stderr bytes.Buffer
	err := run([]string{"-run", "^get$", "-benchtime", "50ms", "-count", "1", "-rows", "2000", "-json", report, "-dir", dir},
		failingWriter{}, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the table could not be written to stdout: broken pipe")
	assert.FileExists(t, report)
	assert.Contains(t, stderr.String(), "Get", "the table went to stderr")
}

// TestAFailedScenarioKeepsTheOthersResults: a scenario that fails does not
// take the results of the others with it, before or after it; the table and
// the JSON name the failure, and the run exits with it. Before, the run
// stopped at the failure and wrote nothing.
func TestAFailedScenarioKeepsTheOthersResults(t *testing.T) {
	old := scenarios
	t.Cleanup(func() { scenarios = old })
	ok := func(name string) scenario {
		return scenario{name, func(*env) ([]Result, error) {
			return []Result{{Scenario: name, Subject: Measure{Name: "subject", OpsPerSec: 1000}}}, nil
		}}
	}
	scenarios = []scenario{ok("first"), {"broken", func(*env) ([]Result, error) {
		return nil, errors.New("the child died")
	}}, ok("last")}
	dir := t.TempDir()
	report := filepath.Join(dir, "statebench.json")
	var stdout, stderr bytes.Buffer
	err := run([]string{"-json", report, "-dir", dir}, &stdout, &stderr)
	require.Error(t, err)
	assert.Equal(t, "broken: the child died", err.Error())
	assert.Contains(t, stdout.String(), " first")
	assert.Contains(t, stdout.String(), " last")
	assert.Contains(t, stdout.String(), "- broken: FAILED: the child died")
	b, err := os.ReadFile(report)
	require.NoError(t, err)
	var rep Report
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Len(t, rep.Results, 2)
	assert.Equal(t, "first", rep.Results[0].Scenario)
	assert.Equal(t, "last", rep.Results[1].Scenario)
	assert.Equal(t, []Failure{{Scenario: "broken", Error: "the child died"}}, rep.Failed)
}
