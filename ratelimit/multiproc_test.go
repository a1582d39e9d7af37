package ratelimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/naivelimit"
	"github.com/statekit/statekit/ratelimit"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helperEnv carries a child's job, as JSON: a re-executed test binary with it
// set is a worker process, not a test run.
const helperEnv = "STATEKIT_RATELIMIT_HELPER"

func TestMain(m *testing.M) {
	if job := os.Getenv(helperEnv); job != "" {
		os.Exit(runChild(job))
	}
	os.Exit(m.Run())
}

// job is what one worker process does: goroutines x requests decisions of
// one request each on one key, through the limiter kind names.
type job struct {
	Kind       string        // fixed, sliding, bucket or naive
	Path       string        // the shared file
	Key        string        // the one key every request uses
	Limit      int64         // per window
	Window     time.Duration // the window
	Procs      int           // workers: each waits for all of them before it fires
	Goroutines int
	Requests   int // per goroutine
	// PerRequest: request i of each goroutine uses key Key:i instead of
	// Key (the idempotency tests: every caller claims the same Requests
	// keys).
	PerRequest bool
}

// tally is what a worker reports: its decisions, and the engine times before
// the first and after the last (every decision's time lies between).
type tally struct {
	Allowed, Refused int64
	First, Last      int64 // unix nanoseconds
}

func newLimiter(db *state.DB, j job) (ratelimit.Limiter, error) {
	switch j.Kind {
	case "fixed":
		return ratelimit.NewFixedWindow(db, j.Limit, j.Window)
	case "sliding":
		return ratelimit.NewSlidingWindow(db, j.Limit, j.Window)
	case "bucket":
		return ratelimit.NewTokenBucket(db, j.Limit, j.Window)
	case "naive":
		return naivelimit.New(db, j.Limit, j.Window), nil
	case "claim", "naive-claim":
		return newClaimer(db, j.Kind == "naive-claim", j.Window), nil
	}
	return nil, fmt.Errorf("unknown kind %q", j.Kind)
}

// runChild is a worker process: it runs its job and prints its tally.
func runChild(spec string) int {
	var j job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fmt.Fprintln(os.Stderr, "job:", err)
		return 2
	}
	// A generous cap: a worker that cannot finish its count in this long
	// fails, it never passes early.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := state.Open(j.Path, state.WithBusyTimeout(time.Minute))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	defer db.Close()
	l, err := newLimiter(db, j)
	if err != nil {
		fmt.Fprintln(os.Stderr, "limiter:", err)
		return 4
	}
	if err := barrier(ctx, db, "barrier:"+j.Key, j.Procs); err != nil {
		fmt.Fprintln(os.Stderr, "barrier:", err)
		return 5
	}
	var tl tally
	var failed atomic.Value
	tl.First = db.Now().UnixNano()
	var wg sync.WaitGroup
	for range j.Goroutines {
		wg.Go(func() {
			for i := range j.Requests {
				key := j.Key
				if j.PerRequest {
					key = fmt.Sprintf("%s:%d", j.Key, i)
				}
				d, err := l.Allow(ctx, key)
				if err != nil {
					failed.Store(err)
					return
				}
				if d.Allowed {
					atomic.AddInt64(&tl.Allowed, 1)
				} else {
					atomic.AddInt64(&tl.Refused, 1)
				}
			}
		})
	}
	wg.Wait()
	tl.Last = db.Now().UnixNano()
	if err, _ := failed.Load().(error); err != nil {
		fmt.Fprintln(os.Stderr, "allow:", err)
		return 6
	}
	if err := json.NewEncoder(os.Stdout).Encode(tl); err != nil {
		return 7
	}
	return 0
}

// barrier counts this process in under key and waits until n processes have
// counted in, so that all of them fire at once: a process that started
// late would otherwise find the others done.
func barrier(ctx context.Context, db *state.DB, key string, n int) error {
	if _, err := db.Incr(ctx, key); err != nil {
		return err
	}
	for {
		v, err := db.Get(ctx, key)
		if err != nil {
			return err
		}
		if c, _ := v.Int(); c >= int64(n) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// fire runs procs worker processes of j at once and adds up their tallies:
// allowed and refused counts, and the span of engine time they decided in.
func fire(t *testing.T, procs int, j job) tally {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	spec, err := json.Marshal(j)
	require.NoError(t, err)
	tallies := make([]tally, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
			out, err := cmd.Output()
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			if assert.NoError(t, err, "worker %d: %s", i, stderr) {
				assert.NoError(t, json.Unmarshal(out, &tallies[i]), "worker %d: %q", i, out)
			}
		})
	}
	wg.Wait()
	require.False(t, t.Failed(), "a worker failed")
	sum := tally{First: tallies[0].First, Last: tallies[0].Last}
	for _, x := range tallies {
		sum.Allowed += x.Allowed
		sum.Refused += x.Refused
		sum.First, sum.Last = min(sum.First, x.First), max(sum.Last, x.Last)
	}
	return sum
}

// The load every exactness test fires at one key: 4 processes x 4 goroutines
// x 40 requests, 640 in all, against a limit of 100.
const (
	procs      = 4
	goroutines = 4
	requests   = 40
	limit      = 100
	total      = procs * goroutines * requests
)

// TestProcessesAreAllowedExactlyTheLimit fires the load at one key through
// each limiter and requires exactly limit allowed. The window is a day and
// the bucket refills one token every 864 s, so the count does not depend on
// the machine's speed: a run whose decisions straddle a day's edge (or take
// longer than a token's refill) is run again on a new key, which a run of a
// few seconds needs about once in tens of thousands.
func TestProcessesAreAllowedExactlyTheLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, kind := range []string{"fixed", "sliding", "bucket"} {
		t.Run(kind, func(t *testing.T) {
			requireExactLimit(t, kind, filepath.Join(t.TempDir(), "shared.state"))
		})
	}
}

// requireExactLimit fires procs x goroutines x requests decisions of
// limiter kind at one key of the store at path (a file, or a URL) and
// requires exactly the limit allowed.
func requireExactLimit(t *testing.T, kind, path string) {
	window := 24 * time.Hour
	for attempt := 1; ; attempt++ {
		require.LessOrEqual(t, attempt, 3, "three runs straddled a window's edge")
		j := job{Kind: kind, Path: path, Key: fmt.Sprintf("client-%d", attempt), Limit: limit,
			Window: window, Procs: procs, Goroutines: goroutines, Requests: requests}
		got := fire(t, procs, j)
		require.Equal(t, int64(total), got.Allowed+got.Refused, "every request decided")
		w := int64(window)
		if kind == "bucket" {
			w /= limit // one token's refill
			if got.Last-got.First < w {
				require.Equal(t, int64(limit), got.Allowed, "allowed exactly the bucket, %d refused", got.Refused)
				return
			}
		} else if got.First/w == got.Last/w {
			require.Equal(t, int64(limit), got.Allowed, "allowed exactly the limit in one window, %d refused", got.Refused)
			return
		}
		t.Logf("run %d decided from %v to %v, across an edge: again on a new key",
			attempt, time.Unix(0, got.First), time.Unix(0, got.Last))
	}
}

// TestNaiveReadThenWriteOverAdmits fires the same load through the naive
// limiter (Get, compare, Set) and requires it to allow more than the limit:
// what the exact limiters above are measured against. Over-admission is a
// race, so a run that happens to stay within the limit is run again on a new
// key, up to 20 runs; the test says how many it took.
func TestNaiveReadThenWriteOverAdmits(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "shared.state")
	for attempt := 1; attempt <= 20; attempt++ {
		j := job{Kind: "naive", Path: path, Key: fmt.Sprintf("client-%d", attempt), Limit: limit,
			Window: 24 * time.Hour, Procs: procs, Goroutines: goroutines, Requests: requests}
		got := fire(t, procs, j)
		require.Equal(t, int64(total), got.Allowed+got.Refused)
		if got.Allowed > limit {
			t.Logf("run %d: the naive limiter allowed %d of %d requests against a limit of %d", attempt, got.Allowed, total, limit)
			return
		}
		t.Logf("run %d: allowed %d, within the limit by chance: again", attempt, got.Allowed)
	}
	t.Fatal("20 runs of the naive limiter never over-admitted")
}
