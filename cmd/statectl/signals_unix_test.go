//go:build unix

package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadsDyingOfSIGPIPELeaveNoCopy: statectl dump app.state | head
// closes the pipe under statectl. Every read command whose stdout is a
// pipe nobody reads still dies of SIGPIPE, as a shell pipeline expects,
// but first removes the private copy it read the file from: none is left
// in $TMPDIR (before, each run left a copy as large as the file, holding
// its data).
func TestReadsDyingOfSIGPIPELeaveNoCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.state")
	writeStateFile(t, path, 1)
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	_, err = db.Lease(context.Background(), "job", "web-1", time.Hour)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	statectl := statectlCopy(t)

	for _, args := range readCommands {
		tmp := t.TempDir()
		r, w, err := os.Pipe()
		require.NoError(t, err)
		require.NoError(t, r.Close()) // nobody reads: the first write fails
		cmd := statectlCommand(statectl, tmp, append([]string{args[0], path}, args[1:]...)...)
		cmd.Stdout = w
		err = cmd.Run()
		w.Close()
		assertDiedOf(t, err, syscall.SIGPIPE, args)
		assertNoCopyLeft(t, tmp, args)
		assertNothingBeside(t, path, args)
	}
}

// TestWriteDyingOfSIGPIPEClosesTheFile: statectl incr app.state n | true.
// The increment is committed and the file closed cleanly before statectl
// dies of SIGPIPE: no -wal or -shm is left beside it, as a crashed writer
// leaves them (with its high-water mark ahead of the clock).
func TestWriteDyingOfSIGPIPEClosesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.state")
	writeStateFile(t, path, 0)
	statectl := statectlCopy(t)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	require.NoError(t, r.Close())
	cmd := statectlCommand(statectl, t.TempDir(), "incr", path, "n")
	cmd.Stdout = w
	err = cmd.Run()
	w.Close()
	assertDiedOf(t, err, syscall.SIGPIPE, []string{"incr"})
	assertNothingBeside(t, path, []string{"incr"})

	db, err := state.Open(path, state.WithReadOnly(), state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	v, err := db.Get(context.Background(), "n")
	require.NoError(t, err)
	assert.Equal(t, "1", v.String(), "the increment was committed")
}

// TestReadsKilledBySignalLeaveNoCopy: a dump of a large file is
// interrupted (^C, kill, a closed terminal) while it writes. statectl dies
// of the signal, as it would have, and removes the private copy first.
func TestReadsKilledBySignalLeaveNoCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.state")
	writeStateFile(t, path, 8) // dump --full prints 8 MiB: more than a pipe holds
	statectl := statectlCopy(t)
	sigs := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}
	unignoreInChildren(t, sigs...)

	for _, sig := range sigs {
		tmp := t.TempDir()
		r, w, err := os.Pipe()
		require.NoError(t, err)
		cmd := statectlCommand(statectl, tmp, "dump", path, "--full")
		cmd.Stdout = w
		require.NoError(t, cmd.Start())
		w.Close()
		// Output has begun: the copy is open, and statectl blocks writing
		// the rest into the pipe, which nobody reads any more.
		_, err = io.ReadFull(r, make([]byte, 1))
		require.NoError(t, err)
		require.NoError(t, cmd.Process.Signal(sig))
		err = cmd.Wait()
		r.Close()
		args := []string{"dump", sig.String()}
		assertDiedOf(t, err, sig, args)
		assertNoCopyLeft(t, tmp, args)
	}
}

// unignoreInChildren has the commands the test starts take sigs' default
// action even when the test itself was started with one of them ignored
// (under nohup, SIGHUP): a child inherits an ignored signal, and statectl
// rightly leaves it ignored, so the test would wait for ever for a death
// that never comes. A signal the test handles is reset to its default in
// a child.
func unignoreInChildren(t *testing.T, sigs ...syscall.Signal) {
	for _, sig := range sigs {
		if signal.Ignored(sig) {
			c := make(chan os.Signal, 1)
			signal.Notify(c, sig)
			t.Cleanup(func() { signal.Stop(c) })
		}
	}
}

// statectlCommand is statectl with TMPDIR tmp, its stderr the test's.
func statectlCommand(statectl, tmp string, args ...string) *exec.Cmd {
	cmd := exec.Command(statectl, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	return cmd
}

// assertDiedOf asserts that err is the exit of a process killed by sig.
func assertDiedOf(t *testing.T, err error, sig syscall.Signal, args []string) {
	t.Helper()
	var ee *exec.ExitError
	if !assert.True(t, errors.As(err, &ee), "%s: %v, want death by %v", args, err, sig) {
		return
	}
	ws := ee.Sys().(syscall.WaitStatus)
	assert.True(t, ws.Signaled() && ws.Signal() == sig, "%s: %v, want death by %v", args, err, sig)
}

// assertNoCopyLeft asserts that tmp, statectl's $TMPDIR, is empty.
func assertNoCopyLeft(t *testing.T, tmp string, args []string) {
	t.Helper()
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "%s left its private copy in $TMPDIR", args)
}

// TestRunWaitingForALeaseEndsAtASignal: a run waiting (--wait) for a lease
// another owner holds ends at SIGTERM with the status a shell shows for
// it (143), saying what it was waiting for; it does not run CMD.
func TestRunWaitingForALeaseEndsAtASignal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	_, err = db.Lease(t.Context(), "job", "other", time.Hour)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	statectl := statectlCopy(t)
	unignoreInChildren(t, syscall.SIGTERM)

	cmd := exec.Command(statectl, "run", path, "--lease", "job", "--wait", "1h", "--", "echo", "ran")
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	var out, errBuf lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errBuf
	require.NoError(t, cmd.Start())
	for i := 0; !strings.Contains(errBuf.String(), "waiting up to 1h"); i++ {
		require.Less(t, i, 2000, "run did not say it waits within 20s: %s", errBuf.String())
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	_ = cmd.Wait()
	assert.Equal(t, 128+int(syscall.SIGTERM), cmd.ProcessState.ExitCode(), errBuf.String())
	assert.Contains(t, errBuf.String(), `terminated while waiting for lease "job"`)
	assert.Empty(t, out.String(), "CMD did not run")
}
