package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunGivesUpOnABusyFileWhenItsWaitEnds: another process holds the
// file's write lock throughout, and run's ttl of 30 s makes its busy
// timeout 5 s. run --wait D gives up with status 2, saying it waited D,
// once D has passed since its first try began: each try waits for the lock
// no longer than the wait left. A wait shorter than the busy timeout is
// one try, cut to D, with nothing left to say it waits for. A wait longer
// than it is a try of 5 s, then tries in the 0.5 s left, said once (unless
// the first try ended late, past all of it).
//
// A first try not cut to the wait takes 5 s; an uncounted first try, or a
// last try that waited its whole busy timeout past the end of the wait,
// takes D and 4.75 s at least, on any machine. Each case is given D and
// 4.5 s, the rest for starting the binary on a loaded machine (run once
// first, so that loading it is not timed), and must have taken D at least.
func TestRunGivesUpOnABusyFileWhenItsWaitEnds(t *testing.T) {
	statectl := statectlCopy(t)
	_, _, _ = runStatectl(t, statectl, t.TempDir(), -1, "help")
	for _, tc := range []struct {
		wait     time.Duration
		waitFlag string
		maySay   bool // that it waits, before it gives up
	}{
		{200 * time.Millisecond, "200ms", false},
		{5500 * time.Millisecond, "5.5s", true},
	} {
		t.Run(tc.waitFlag, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "app.state")
			db, err := state.Open(path, state.WithoutBackground())
			require.NoError(t, err)
			require.NoError(t, db.Close())
			holdWriteLock(t, path)

			began := time.Now()
			out, errOut, code := runStatectl(t, statectl, t.TempDir(), -1,
				"run", path, "--lease", "job", "--ttl", "30s", "--wait", tc.waitFlag, "--", "echo", "ran")
			took := time.Since(began)
			assert.Equal(t, 2, code, errOut)
			assert.Empty(t, out, "the command did not run")
			busy := "statectl: " + path + ": the file is busy (another process holds its write lock)"
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			if tc.maySay && len(lines) == 2 {
				assert.Equal(t, busy+"; waiting up to "+tc.waitFlag, lines[0])
				lines = lines[1:]
			}
			assert.Equal(t, []string{busy + " (waited " + tc.waitFlag + ")"}, lines)
			assert.GreaterOrEqual(t, took, tc.wait, "run waited what it says")
			assert.Less(t, took, tc.wait+4500*time.Millisecond, "run gave up when its wait ended: %s", errOut)
		})
	}
}
