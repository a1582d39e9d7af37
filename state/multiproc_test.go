package state_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helperEnv names the role a re-executed test binary plays.
const helperEnv = "STATEKIT_TEST_HELPER"

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(runHelper(role, os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

// helperRoles are the roles other test files add (the real-kernel tests,
// "kernel-..."): each runs in the child process with the path and does all
// the work. Their names must not be this file's ("incr", "lease").
var helperRoles = map[string]func(path string) int{}

// runHelper is a child process: it opens path and does its role's work,
// printing results on stdout.
func runHelper(role, path string) int {
	if h, ok := helperRoles[role]; ok {
		return h(path)
	}
	ctx := context.Background()
	db, err := state.Open(path, state.WithBusyTimeout(30*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	defer db.Close()
	switch role {
	case "incr":
		for i := 0; i < 1000; i++ {
			if _, err := db.Incr(ctx, "hot"); err != nil {
				fmt.Fprintln(os.Stderr, "incr:", err)
				return 4
			}
		}
	case "lease":
		owner := strconv.Itoa(os.Getpid())
		for i := 0; i < 50; i++ {
			l, err := db.Lease(ctx, "job", owner, time.Minute)
			if err != nil {
				continue
			}
			fmt.Println(l.Token)
			if err := db.Release(ctx, l); err != nil {
				fmt.Fprintln(os.Stderr, "release:", err)
				return 5
			}
		}
	}
	return 0
}

// runChildren starts n copies of the test binary in role on path at once
// and returns their outputs.
func runChildren(t *testing.T, n int, role, path string) []string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	outs := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(exe, "-test.run=^$", path)
			cmd.Env = append(os.Environ(), helperEnv+"="+role)
			out, err := cmd.Output()
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			assert.NoError(t, err, "child %d: %s", i, stderr)
			outs[i] = string(out)
		}()
	}
	wg.Wait()
	return outs
}

func TestProcessesShareOneFileExactly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.state")
	// The file does not exist yet: four processes create it at the same moment.
	runChildren(t, 4, "incr", path)
	db, err := state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	v, err := db.Get(t.Context(), "hot")
	require.NoError(t, err)
	assert.Equal(t, "4000", v.String(), "4 processes x 1000 Incr")
}

func TestProcessesNeverShareAToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lease.state")
	outs := runChildren(t, 4, "lease", path)
	var tokens []int
	for _, out := range outs {
		for _, f := range strings.Fields(out) {
			n, err := strconv.Atoi(f)
			require.NoError(t, err)
			tokens = append(tokens, n)
		}
	}
	require.NotEmpty(t, tokens)
	sort.Ints(tokens)
	for i := 1; i < len(tokens); i++ {
		assert.NotEqual(t, tokens[i-1], tokens[i], "token %d granted twice", tokens[i])
	}
	assert.Equal(t, len(tokens), tokens[len(tokens)-1], "tokens 1..n with no gap: every grant was released")
}
