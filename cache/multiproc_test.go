package cache_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/cache"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helperEnv carries a worker's job as JSON: a re-executed test binary with it
// set is a worker process, not a test run.
const helperEnv = "STATEKIT_CACHE_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(runWorker(spec))
	}
	os.Exit(m.Run())
}

// fillJob is one worker process: Goroutines callers, caller i asking for
// Keys[i%len(Keys)]; Callers is how many callers of each key there are in
// all the processes together.
type fillJob struct {
	Path       string
	Keys       []string
	Goroutines int
	Callers    int
}

// runWorker runs a fillJob and prints, as JSON, the value each caller got.
// Every caller that finds its key missing counts itself under "missed:KEY";
// the computation counts its runs under "calls:KEY" and waits until every
// caller of its key, in every process, has missed, so that they all come for
// the lease.
func runWorker(spec string) int {
	var j fillJob
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fmt.Fprintln(os.Stderr, "job:", err)
		return 2
	}
	// A generous cap: a worker that cannot finish in this long fails.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := state.Open(j.Path, state.WithBusyTimeout(time.Minute))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	defer db.Close()
	got := make([]string, j.Goroutines)
	errs := make([]error, j.Goroutines)
	var hookErr error
	var hookMu sync.Mutex
	cache.SetMissHook(func(key string) {
		if _, err := db.Incr(ctx, "missed:"+key); err != nil {
			hookMu.Lock()
			hookErr = err
			hookMu.Unlock()
		}
	})
	var wg sync.WaitGroup
	for i := range j.Goroutines {
		key := j.Keys[i%len(j.Keys)]
		wg.Go(func() {
			fn := func(ctx context.Context) ([]byte, error) {
				if _, err := db.Incr(ctx, "calls:"+key); err != nil {
					return nil, err
				}
				for {
					v, err := db.Get(ctx, "missed:"+key)
					if err != nil {
						return nil, err
					}
					if n, _ := v.Int(); n >= int64(j.Callers) {
						return []byte(fmt.Sprintf("value of %s from %d", key, os.Getpid())), nil
					}
					select {
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-time.After(time.Millisecond):
					}
				}
			}
			v, err := cache.GetOrCompute(ctx, db, key, time.Hour, fn,
				cache.WithLease(2*time.Minute), cache.WithMaxWait(2*time.Minute), cache.WithPoll(5*time.Millisecond))
			got[i], errs[i] = string(v), err
		})
	}
	wg.Wait()
	if err := errors.Join(append(errs, hookErr)...); err != nil {
		fmt.Fprintln(os.Stderr, "get or compute:", err)
		return 4
	}
	if err := json.NewEncoder(os.Stdout).Encode(got); err != nil {
		return 5
	}
	return 0
}

// TestProcessesShareOneFill: 3 processes of 8 goroutines ask for two cold
// keys at once (12 callers each); each key's fn runs once, and every caller
// gets that one value.
func TestProcessesShareOneFill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	requireOneFill(t, filepath.Join(t.TempDir(), "shared.state"))
}

// requireOneFill runs TestProcessesShareOneFill's processes on the store
// at path (a file, or a URL) and checks what they got.
func requireOneFill(t *testing.T, path string) {
	const procs, goroutines = 3, 8
	keys := []string{"report:a", "report:b"}
	spec, err := json.Marshal(fillJob{Path: path, Keys: keys, Goroutines: goroutines,
		Callers: procs * goroutines / len(keys)})
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)

	outs := make([][]string, procs)
	var wg sync.WaitGroup
	for p := range procs {
		wg.Go(func() {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
			out, err := cmd.Output()
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			if assert.NoError(t, err, "worker %d: %s", p, stderr) {
				assert.NoError(t, json.Unmarshal(out, &outs[p]), "worker %d: %q", p, out)
			}
		})
	}
	wg.Wait()
	require.False(t, t.Failed())

	db, err := state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	for _, key := range keys {
		calls, err := db.Get(ctx, "calls:"+key)
		require.NoError(t, err)
		missed, err := db.Get(ctx, "missed:"+key)
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(procs*goroutines/len(keys)), missed.String(), "%s: every caller missed", key)
		assert.Equal(t, "1", calls.String(), "%s: fn ran once for %d callers in %d processes", key, procs*goroutines/len(keys), procs)
		stored, err := db.Get(ctx, key)
		require.NoError(t, err)
		for p := range procs {
			for i, v := range outs[p] {
				if keys[i%len(keys)] == key {
					assert.Equal(t, stored.String(), v, "process %d caller %d", p, i)
				}
			}
		}
	}
}
