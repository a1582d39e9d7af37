package state_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWallStepWhileRunningChangesNoDeadline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "k", "v", state.TTL(10*time.Second)))
		l, err := f.db.Lease(f.ctx, "job", "a", 10*time.Second)
		require.NoError(t, err)
		for _, step := range []time.Duration{time.Hour, -2 * time.Hour, 24 * time.Hour} {
			f.clock.StepWall(step)
			left, err := f.db.TTL(f.ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, 10*time.Second, left, "after a wall step of %v", step)
		}
		_, err = f.db.Lease(f.ctx, "job", "b", time.Second)
		assert.ErrorIs(t, err, state.ErrLeaseHeld, "a wall step forward does not end a live lease")
		f.clock.Advance(10 * time.Second)
		assert.Equal(t, "<absent>", f.get("k"), "true time passing ends it")
		assert.ErrorIs(t, f.db.Renew(f.ctx, l, time.Second), state.ErrLeaseLost)
	})
}

// restartBehind writes a key with a 10 s TTL, lets 5 s pass, then restarts
// with the wall clock an hour behind, and returns the time left after.
func restartBehind(t *testing.T, f *fixture, opts ...state.Option) time.Duration {
	require.NoError(t, f.db.Set(f.ctx, "k", "v", state.TTL(10*time.Second)))
	f.clock.Advance(5 * time.Second)
	_, err := f.db.Get(f.ctx, "k")
	require.NoError(t, err)
	require.NoError(t, f.db.Close())
	f.clock = f.clock.Restart()
	f.clock.StepWall(-time.Hour)
	f.db = f.open(opts...)
	left, err := f.db.TTL(f.ctx, "k")
	require.NoError(t, err)
	return left
}

func TestRestartWithWallBehindResumesFromMark(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		left := restartBehind(t, f)
		assert.LessOrEqual(t, left, 5*time.Second, "time never goes back across a restart")
		assert.GreaterOrEqual(t, left, 5*time.Second-500*time.Millisecond, "and resumes at most the mark's lead later")
		assert.Equal(t, 5*time.Second, left, "after a clean close, exactly where it stopped")
	})
	// A crash leaves the handle's mark up to the lead (500 ms) ahead of the
	// time it used: the next process resumes there, never earlier.
	t.Run("after a crash", func(t *testing.T) {
		ctx := context.Background()
		m := faults.NewMemFS(1)
		clock := newClock()
		open := func(pid int) *state.DB {
			db, err := state.Open("/sim/behind.state", state.WithFS(m.Process(pid)), state.WithClock(clock), state.WithoutBackground())
			require.NoError(t, err)
			return db
		}
		db := open(1)
		require.NoError(t, db.Set(ctx, "k", "v", state.TTL(10*time.Second)))
		clock.Advance(5 * time.Second)
		_, err := db.Get(ctx, "k")
		require.NoError(t, err)
		m.Crash(1)
		_ = db.Close() // fails: the process is dead, its mark stays
		clock = clock.Restart()
		clock.StepWall(-time.Hour)
		db = open(2)
		defer db.Close()
		left, err := db.TTL(ctx, "k")
		require.NoError(t, err)
		assert.LessOrEqual(t, left, 5*time.Second, "time never goes back across a crash")
		assert.GreaterOrEqual(t, left, 5*time.Second-500*time.Millisecond, "and resumes at most the mark's lead later")
		// Exactly the lead later: pins hwmLeadMillis (clock.go) from below
		// too, where the bounds above pass with a shorter lead (450 ms).
		assert.Equal(t, 5*time.Second-500*time.Millisecond, left, "resumes at the mark, the lead (500 ms) past the time used")
	})
}

func TestNoHWMBugStretchesDeadlines(t *testing.T) {
	f := newFixture(t, backends[0])
	left := restartBehind(t, f, planted(bugs.Set{}.With(bugs.NoHWM)))
	assert.Greater(t, left, time.Hour, "without the mark, a wall clock behind stretches the TTL")
}

func TestRestartWithWallAheadUsesWall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Set(f.ctx, "k", "v", state.TTL(time.Hour)))
		require.NoError(t, f.db.Close())
		f.clock = f.clock.Restart()
		f.clock.StepWall(30 * time.Minute)
		f.db = f.open()
		left, err := f.db.TTL(f.ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, 30*time.Minute, left, "time spent down counts, by the wall clock")
	})
}

func TestEngineTimeNeverGoesBack(t *testing.T) {
	f := newFixture(t, backends[0])
	prev := f.db.Now()
	for i := 0; i < 50; i++ {
		if i%7 == 0 {
			f.reopen()
			f.clock.StepWall(-time.Minute)
		}
		f.clock.Advance(time.Duration(i) * time.Millisecond)
		require.NoError(t, f.db.Set(f.ctx, "k", i))
		now := f.db.Now()
		assert.False(t, now.Before(prev), "step %d: %v before %v", i, now, prev)
		prev = now
	}
}

// TestEngineNeverReadsTheClock keeps the promise that the engine takes time
// only from its Clock: no time.Now, time.Since or time.Until, called or
// taken as a value, and no SQL clock functions: SQLite's date(), time(),
// datetime() and strftime(fmt) read the clock too when given no time.
func TestEngineNeverReadsTheClock(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(packageDir(t), "*.go"))
	require.NoError(t, err)
	forbidden := regexp.MustCompile(`time\.(Now|Since|Until)\(|unixepoch|julianday|'now'|current_(time|date|timestamp)`)
	// In code, not comments: a function value, and SQLite's date and time
	// functions (not a Go method such as t.Date()).
	forbiddenInCode := regexp.MustCompile(`time\.(Now|Since|Until)\b|(?i:(^|[^.\w])(date|time|datetime|strftime|timediff)\s*\()`)
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		for i, line := range strings.Split(string(src), "\n") {
			if forbidden.MatchString(strings.ToLower(line)) || forbidden.MatchString(line) {
				t.Errorf("%s:%d reads the clock: %s", name, i+1, strings.TrimSpace(line))
			}
			if code, _, _ := strings.Cut(line, "//"); forbiddenInCode.MatchString(code) {
				t.Errorf("%s:%d reads the clock: %s", name, i+1, strings.TrimSpace(line))
			}
		}
		checked++
	}
	assert.Greater(t, checked, 10, "the engine's files were found")
}

// TestCrashLoopTimeCreepIsBounded: a process killed before its handle
// closes leaves its time mark up to the lead past the time it used, and the
// next one starts there. Processes killed again and again, the wall clock
// standing still, must not push time ahead by a full lead each: a handle
// that starts ahead of the wall clock keeps its mark only a short lead
// ahead.
func TestCrashLoopTimeCreepIsBounded(t *testing.T) {
	ctx := context.Background()
	m := faults.NewMemFS(3)
	clock := newClock()
	const kills = 10
	for pid := 1; pid <= kills; pid++ {
		db, err := state.Open("/sim/loop.state", state.WithFS(m.Process(pid)), state.WithClock(clock), state.WithoutBackground())
		require.NoError(t, err)
		_, err = db.Get(ctx, "k") // uses a time: the mark moves ahead of it
		require.ErrorIs(t, err, state.ErrNotFound)
		m.Crash(pid)
		_ = db.Close() // fails: the process is dead, its mark stays
	}
	db, err := state.Open("/sim/loop.state", state.WithFS(m.Process(kills+1)), state.WithClock(clock), state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	ahead := db.Now().Sub(clock.Wall())
	t.Logf("after %d kills, time is %v ahead of the wall clock", kills, ahead)
	assert.LessOrEqual(t, ahead, 2*state.HighWaterLead, "time crept a lead per kill")
	// The first kill leaves a full lead, each later one at most the short
	// lead of a handle that started ahead: 500 ms + 9 x 50 ms.
	assert.LessOrEqual(t, ahead, state.HighWaterLead+(kills-1)*50*time.Millisecond, "a kill after the first added more than 50 ms")
	// Exactly that: pins both leads (hwmLeadMillis, hwmLeadAheadMillis in
	// clock.go) from below too, where the bounds above pass with shorter
	// ones (450 ms, 40 ms).
	assert.Equal(t, 950*time.Millisecond, ahead, "the first kill leaves 500 ms, each later one 50 ms")
}
