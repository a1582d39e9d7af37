package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/statekit/statekit/internal/redistest"
)

// TestMain lets the test binary be statebench's worker process, as the
// scenarios re-execute their own binary with childArg.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		if err := child(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "statebench child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if dir := os.Getenv(asParent); dir != "" {
		os.Exit(parentOfOneWorker(dir))
	}
	os.Exit(m.Run())
}

// TestApp runs the app scenario end to end with a few requests a flavour:
// two server processes a flavour, every answer a 200 or a 429, and each
// flavour exact on a burst at one user (runApp fails otherwise). Without
// redis-server only the file flavours run and the Redis half is skipped.
func TestApp(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const requests = 300
	e := &env{ctx: context.Background(), dir: t.TempDir(), count: 1, exe: exe, log: io.Discard, appRequests: requests}
	res, err := runApp(e)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 {
		t.Fatal("no results")
	}
	for _, r := range res {
		if r.Subject.Ops != requests || r.Baseline.Ops != requests {
			t.Errorf("%s beside %s: %d and %d requests measured, want %d each", r.Subject.Name, r.Baseline.Name, r.Subject.Ops, r.Baseline.Ops, requests)
		}
		if !strings.HasPrefix(r.Subject.Name, "file") {
			t.Errorf("subject %q: want a file flavour", r.Subject.Name)
		}
	}
	t.Run("redis", func(t *testing.T) {
		if redistest.Binary() == "" {
			t.Skip("redis-server not installed: skipping the Redis half; .ci/run installs it")
		}
		targets := 0
		for _, r := range res {
			if !strings.HasPrefix(r.Baseline.Name, "redis") {
				t.Errorf("baseline %q: want a Redis flavour", r.Baseline.Name)
			}
			if r.Target != "" {
				targets++
			}
		}
		if targets != 2 {
			t.Errorf("%d lines with a target, want 2 (the two matched-durability pairs)", targets)
		}
	})
}
