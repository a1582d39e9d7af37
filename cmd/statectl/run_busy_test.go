package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunWaitsForABusyFile: another process holds the file's write lock
// for longer than run's busy timeout (a third of its ttl); run --wait
// waits for it, at the open and at the grant, instead of failing at once.
// Without --wait it fails with status 2, saying the file is busy. The lock
// is let go only once run said it waits (no pause orders the two), and the
// ttl (6 s, a busy timeout of 2 s) is far longer than a stall of a run on a
// loaded machine: with 300 ms, a run stalled past it found its lease lost.
func TestRunWaitsForABusyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Close())
	statectl := statectlCopy(t)

	release := holdWriteLock(t, path)
	_, errOut, code := runStatectl(t, statectl, t.TempDir(), -1, "run", path, "--lease", "job", "--ttl", "6s", "--", "true")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "busy")
	release()

	release = holdWriteLock(t, path)
	cmd := exec.Command(statectl, "run", path, "--lease", "job", "--ttl", "6s", "--wait", "20s",
		"--", "sh", "-c", `echo "token=$STATEKIT_FENCING_TOKEN"`)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	var out bytes.Buffer
	var errBuf lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errBuf
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	const waiting = "busy (another process holds its write lock); waiting up to 20s"
	for i := 0; !strings.Contains(errBuf.String(), waiting); i++ {
		select {
		case err := <-exited:
			t.Fatalf("run ended (%v) while the lock was held, without saying it waits: %s", err, errBuf.String())
		default:
		}
		require.Less(t, i, 2000, "run did not say it waits within 20s: %s", errBuf.String())
		time.Sleep(10 * time.Millisecond)
	}
	release()
	require.NoError(t, <-exited, errBuf.String())
	assert.Equal(t, "token=1\n", out.String())
}

// holdWriteLock takes the file's write lock (BEGIN IMMEDIATE) on a plain
// SQLite connection, as another process would, until release is called or
// the test ends.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	raw.SetMaxOpenConns(1)
	conn, err := raw.Conn(t.Context())
	require.NoError(t, err)
	_, err = conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`)
	require.NoError(t, err)
	release = sync.OnceFunc(func() {
		_, _ = conn.ExecContext(context.Background(), `ROLLBACK`)
		_ = conn.Close()
		_ = raw.Close()
	})
	t.Cleanup(release)
	return release
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRunEndsTheCommandWhenRenewalsFailPastTheTTL: once CMD runs, another
// process takes the file's write lock and keeps it, so every renewal fails
// with the file busy, which run retries; but once the lease's time has run
// out without one, another owner could hold it, so run sends CMD SIGTERM
// and exits 76 saying why. The ttl (6 s) is far longer than a stall of run
// on a loaded machine; CMD ends by itself after 60 s if it is never told.
func TestRunEndsTheCommandWhenRenewalsFailPastTheTTL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Close())
	statectl := statectlCopy(t)

	started := filepath.Join(dir, "started")
	cmd := exec.Command(statectl, "run", path, "--lease", "job", "--ttl", "6s", "--",
		"sh", "-c", `trap 'echo got TERM; exit 7' TERM; touch "$1"; n=0; while [ $n -lt 6000 ]; do sleep 0.01; n=$((n+1)); done`, "sh", started)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	var out, errBuf lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errBuf
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for i := 0; ; i++ {
		if _, err := os.Stat(started); err == nil {
			break
		}
		require.Less(t, i, 2000, "CMD did not start within 20s: %s", errBuf.String())
		time.Sleep(10 * time.Millisecond)
	}
	holdWriteLock(t, path)
	err = <-exited
	assert.Equal(t, exitLost, cmd.ProcessState.ExitCode(), "%v: %s", err, errBuf.String())
	assert.Equal(t, "got TERM\n", out.String(), "CMD was told to stop")
	assert.Contains(t, errBuf.String(), "renewing lease \"job\" failed, will retry")
	assert.Contains(t, errBuf.String(), "renewals failed until the ttl ran out")
}

// TestRunBusyTimeoutIsAThirdOfTheTTLUpToFiveSeconds: run's verbs wait for
// a busy file a third of the ttl, so that a renewal fails well before the
// lease runs out, and never more than the 5 s any verb waits by default.
func TestRunBusyTimeoutIsAThirdOfTheTTLUpToFiveSeconds(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{3 * time.Second, time.Second},
		{9 * time.Second, 3 * time.Second},
		{15 * time.Second, 5 * time.Second},
		{30 * time.Second, 5 * time.Second},
		{time.Hour, 5 * time.Second},
	} {
		assert.Equal(t, c.want, runBusyTimeout(c.ttl), "--ttl %v", c.ttl)
	}
}
