package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/stress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVerdictOfEveryKindOfRun: the exit status and the line a run's report
// gets, for every mix of what it found, -expect, an interruption and the
// check's limit. A violation an interruption explains (a short run) or the
// limit's own is no failure; a buffered increment dropped is one; a run
// that expects a violation passes only on finding it, even interrupted or
// limited, and otherwise says why it could not.
func TestVerdictOfEveryKindOfRun(t *testing.T) {
	dup := stress.Violation{Kind: stress.KindDuplicateToken}
	short := stress.Violation{Kind: stress.KindShortRun}
	limit := stress.Violation{Kind: stress.KindCheckLimit}
	for _, c := range []struct {
		name   string
		rep    stress.Report
		expect string
		code   int
		says   string // "" for nothing
	}{
		{"clean", stress.Report{}, "", exitPass, ""},
		{"a violation", stress.Report{Violations: []stress.Violation{dup}}, "", exitViolation, ""},
		{"a dropped increment", stress.Report{Dropped: 1}, "", exitViolation, ""},
		{"a short run", stress.Report{Violations: []stress.Violation{short}}, "", exitViolation, ""},
		{"interrupted", stress.Report{Stopped: stress.StoppedInterrupted}, "", exitUsage, "interrupted: after 2s; what ran passed"},
		{"interrupted, so short", stress.Report{Stopped: stress.StoppedInterrupted, Violations: []stress.Violation{short}}, "", exitUsage, "interrupted: after 2s; what ran passed"},
		{"interrupted with a violation", stress.Report{Stopped: stress.StoppedInterrupted, Violations: []stress.Violation{short, dup}}, "", exitViolation, ""},
		{"limited", stress.Report{Violations: []stress.Violation{limit}}, "", exitUsage, "check limit: the check stopped at -check-limit 1s; what it checked passed"},
		{"limited with a violation", stress.Report{Violations: []stress.Violation{limit, dup}}, "", exitViolation, ""},
		{"expected, found", stress.Report{Violations: []stress.Violation{dup}}, dup.Kind, exitPass, "expected:    a duplicate-token violation, found"},
		{"expected, found, interrupted", stress.Report{Stopped: stress.StoppedInterrupted, Violations: []stress.Violation{short, dup}}, dup.Kind, exitPass, "expected:    a duplicate-token violation, found"},
		{"expected, found, limited", stress.Report{Violations: []stress.Violation{limit, dup}}, dup.Kind, exitPass, "expected:    a duplicate-token violation, found"},
		{"expected, interrupted first", stress.Report{Stopped: stress.StoppedInterrupted}, dup.Kind, exitUsage, "interrupted: after 2s, before it found the duplicate-token violation it expects"},
		{"expected, limited first", stress.Report{Violations: []stress.Violation{limit}}, dup.Kind, exitUsage, "check limit: the check stopped at -check-limit 1s before it found the duplicate-token violation it expects"},
		{"expected, missed", stress.Report{}, dup.Kind, exitViolation, "the check missed the planted bug"},
		{"expected, another found", stress.Report{Violations: []stress.Violation{short}}, dup.Kind, exitViolation, "the check missed the planted bug"},
	} {
		var out bytes.Buffer
		c.rep.Elapsed = 2 * time.Second
		assert.Equal(t, c.code, verdict(&c.rep, c.expect, time.Second, &out), c.name)
		if c.says == "" {
			assert.Empty(t, out.String(), c.name)
		} else {
			assert.Contains(t, out.String(), c.says, c.name)
		}
	}
}

// TestRerunLineKeepsWhatWasGiven: the rerun line gives a bool flag set to
// false as such (a default that is true would otherwise be turned on
// again), and quotes for a shell what a shell would split or drop.
func TestRerunLineKeepsWhatWasGiven(t *testing.T) {
	fs := flag.NewFlagSet("statestress", flag.ContinueOnError)
	fs.Bool("step-clock", true, "")
	fs.String("epoch", "", "")
	require.NoError(t, fs.Parse([]string{"-step-clock=false", "-epoch", ""}))
	assert.Equal(t, "statestress -seed 7 -epoch '' -step-clock=false", rerunLine(fs, 7))
	for s, want := range map[string]string{
		"":          "''",
		"plain-1.5": "plain-1.5",
		"a b":       "'a b'",
		"it's":      `'it'\''s'`,
		"$HOME":     "'$HOME'",
	} {
		assert.Equal(t, want, shellQuote(s), "%q", s)
	}
}

// TestRunThatCouldNotStartLeavesNoDirectory: a run whose flags are sound
// but which cannot start (no Redis server at -redis-url) exits 2 and
// removes the empty directory it made for its files.
func TestRunThatCouldNotStartLeavesNoDirectory(t *testing.T) {
	port, err := redistest.FreePort()
	require.NoError(t, err)
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := run(t.Context(), []string{"-procs", "1", "-until-calls", "10", "-kill-every", "0", "-seed", "1",
		"-redis-url", fmt.Sprintf("redis://127.0.0.1:%d/0", port), "-dir", dir}, &out, &errs)
	assert.Equal(t, exitUsage, code, "%s\n%s", out.String(), errs.String())
	assert.Contains(t, errs.String(), "; rerun: ", "the run was about to start")
	assert.NotContains(t, errs.String(), "the run's files are in")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}
