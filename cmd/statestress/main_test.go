package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/statekit/statekit/stress"
	"github.com/stretchr/testify/assert"
)

// TestMain lets a run started by a test re-execute this binary as its
// workers.
func TestMain(m *testing.M) {
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
		{"-nope"},
		{"extra"},
	} {
		var out, errs bytes.Buffer
		assert.Equal(t, 2, run(args, &out, &errs), "%q: %s", args, errs.String())
		assert.NotEmpty(t, errs.String(), "%q says why", args)
		assert.Empty(t, out.String())
	}
}
