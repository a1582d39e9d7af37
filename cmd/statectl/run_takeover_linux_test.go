package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What can happen to a lease of run's own owner while run watches it, to
// tell a live run of that owner from a dead one: each must end in the
// grant it calls for, with a token no other holder has.
//
// Each case leaves a lease of owner "sup" (6 s) that nobody renews, as a
// run of that owner killed with SIGKILL would, starts a run of "sup", and
// once run has the file open acts during its watch (half the lease's time
// left, about 3 s). Should run get there late, the case still holds: each
// outcome asserted is the right one whenever the act lands.

// leaveStaleLease grants lease "job" to owner "sup" for 6 s and leaves it
// held, and returns its token.
func leaveStaleLease(t *testing.T, path string) int64 {
	t.Helper()
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	l, err := db.Lease(t.Context(), "job", "sup", 6*time.Second)
	require.NoError(t, err)
	return l.Token
}

// takeover is a run of owner "sup" started on path.
type takeover struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	errOut lockedBuffer
	exited chan error
}

// startTakeover starts statectl run on path as owner "sup" with args
// before the command, which prints its token.
func startTakeover(t *testing.T, statectl, path string, args ...string) *takeover {
	t.Helper()
	r := &takeover{exited: make(chan error, 1)}
	all := append([]string{"run", path, "--lease", "job", "--owner", "sup"}, args...)
	all = append(all, "--", "sh", "-c", `echo "token=$STATEKIT_FENCING_TOKEN"`)
	r.cmd = exec.Command(statectl, all...)
	r.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.errOut
	require.NoError(t, r.cmd.Start())
	go func() { r.exited <- r.cmd.Wait() }()
	t.Cleanup(func() { _ = r.cmd.Process.Kill() })
	// Run has the file open: it looks at the lease next, and watches it.
	fds := fmt.Sprintf("/proc/%d/fd", r.cmd.Process.Pid)
	for i := 0; ; i++ {
		require.Less(t, i, 3000, "run did not open %s within 30 s", path)
		entries, _ := os.ReadDir(fds)
		open := false
		for _, e := range entries {
			if target, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && target == path {
				open = true
			}
		}
		if open {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // into the watch, most likely
	return r
}

// code waits for run to end and returns its exit status.
func (r *takeover) code(t *testing.T) int {
	t.Helper()
	select {
	case err := <-r.exited:
		return exitCode(t, err)
	case <-time.After(2 * time.Minute):
		t.Fatalf("run did not end: %s", r.errOut.String())
	}
	return -1
}

// waitSaid waits until run's stderr holds s.
func (r *takeover) waitSaid(t *testing.T, s string) {
	t.Helper()
	for i := 0; !strings.Contains(r.errOut.String(), s); i++ {
		require.Less(t, i, 3000, "run did not say %q within 30 s: %s", s, r.errOut.String())
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunTakeoverWhileItWatches(t *testing.T) {
	statectl := statectlCopy(t)
	newFile := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "app.state")
		require.Equal(t, int64(1), leaveStaleLease(t, path))
		return path
	}
	const renews = "in another run that renews it"

	// Released meanwhile: free, so run takes it at once, with the next
	// token, and neither waits for a live run nor takes anything over.
	t.Run("released", func(t *testing.T) {
		path := newFile(t)
		r := startTakeover(t, statectl, path, "--wait", "20s")
		db, err := state.Open(path, state.WithoutBackground())
		require.NoError(t, err)
		require.NoError(t, db.Release(t.Context(), &state.Lease{Name: "job", Owner: "sup", Token: 1}))
		require.NoError(t, db.Close())
		require.Equal(t, 0, r.code(t), r.errOut.String())
		assert.Equal(t, "token=2\n", r.out.String())
		assert.NotContains(t, r.errOut.String(), renews)
		assert.NotContains(t, r.errOut.String(), "taking it over")
	})

	// Granted anew to the same owner (another run of it took it over):
	// a new grant, not a renewal. Run watches the new one, which nobody
	// renews either, and takes it over from its token.
	t.Run("granted anew", func(t *testing.T) {
		path := newFile(t)
		r := startTakeover(t, statectl, path, "--wait", "20s")
		db, err := state.Open(path, state.WithoutBackground())
		require.NoError(t, err)
		require.NoError(t, db.Release(t.Context(), &state.Lease{Name: "job", Owner: "sup", Token: 1}))
		l, err := db.Lease(t.Context(), "job", "sup", 6*time.Second)
		require.NoError(t, err)
		require.Equal(t, int64(2), l.Token)
		require.NoError(t, db.Close())
		require.Equal(t, 0, r.code(t), r.errOut.String())
		assert.Equal(t, "token=3\n", r.out.String())
		assert.NotContains(t, r.errOut.String(), renews)
		assert.Contains(t, r.errOut.String(), `lease "job" of this owner, "sup", was not renewed: taking it over from token 2`)
	})

	// Another process holds the file's write lock from within the watch
	// (run's looks at the lease find it busy too)
	// until run says it waits: run keeps watching through looks that find
	// the file busy, then waits for the file to release the stale lease,
	// and its grant takes token 2. (Released at once after a busy
	// release, the grant would extend the stale lease with token 1, which
	// its holder, were it only paused, would share; no test can time the
	// file to come free at that moment.)
	t.Run("busy at the takeover", func(t *testing.T) {
		path := newFile(t)
		r := startTakeover(t, statectl, path, "--ttl", "1500ms", "--wait", "20s")
		release := holdWriteLock(t, path)
		r.waitSaid(t, "busy (another process holds its write lock); waiting up to 20s")
		release()
		require.Equal(t, 0, r.code(t), r.errOut.String())
		assert.Equal(t, "token=2\n", r.out.String())
		assert.Contains(t, r.errOut.String(), "taking it over from token 1")
	})

	// Busy past --wait: run gives up with status 2 (an error, not 75: the
	// lease was not seen held), saying the file is busy, and runs nothing.
	t.Run("busy past the wait", func(t *testing.T) {
		path := newFile(t)
		r := startTakeover(t, statectl, path, "--ttl", "1500ms", "--wait", "2s")
		holdWriteLock(t, path) // until the test ends
		assert.Equal(t, 2, r.code(t), r.errOut.String())
		assert.Empty(t, r.out.String())
		assert.Contains(t, r.errOut.String(), "busy (another process holds its write lock) (waited 2s)")
	})
}
