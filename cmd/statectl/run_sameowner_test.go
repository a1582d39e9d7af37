package main

import (
	"context"
	"database/sql"
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

// TestRunsOfOneOwnerStartedTogetherTakeTurns: two runs with the same
// --owner that both find the lease free must not both run their command.
// Both wait for lease "job", held by "other"; then the test takes the
// file's write lock, so that each run's next try looks at the lease (held
// by another owner: nothing of its own to watch) and blocks in its grant.
// The test frees the lease in that same transaction and commits: the two
// grants run back to back, the first a new grant and the second an
// extension of it, with its token. The second run must see that its grant
// extended another run's lease and wait its turn, not run the command
// with the first one's token. A run that got to its grant only after the
// commit (a loaded machine) looks at the lease first and waits too: the
// log below is the right one either way.
func TestRunsOfOneOwnerStartedTogetherTakeTurns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	_, err = db.Lease(t.Context(), "job", "other", time.Hour)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	statectl := statectlCopy(t)
	logPath := filepath.Join(dir, "log")

	type started struct {
		cmd    *exec.Cmd
		errOut *lockedBuffer
		exited chan error
	}
	var runs []started
	for range 2 {
		cmd := exec.Command(statectl, "run", path, "--lease", "job", "--owner", "sup", "--ttl", "30s", "--wait", "2m",
			"--", "sh", "-c", `echo "start $STATEKIT_FENCING_TOKEN" >> "$LOG"; sleep 1; echo "end $STATEKIT_FENCING_TOKEN" >> "$LOG"`)
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0", "LOG="+logPath)
		r := started{cmd: cmd, errOut: &lockedBuffer{}, exited: make(chan error, 1)}
		cmd.Stderr = r.errOut
		require.NoError(t, cmd.Start())
		go func() { r.exited <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		runs = append(runs, r)
	}
	for _, r := range runs {
		for i := 0; !strings.Contains(r.errOut.String(), `is held by "other"`); i++ {
			require.Less(t, i, 6000, "run did not say it waits for other within 60 s: %s", r.errOut.String())
			time.Sleep(10 * time.Millisecond)
		}
	}

	// A run may be in its grant when the test asks: wait for it.
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(20000)")
	require.NoError(t, err)
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	conn, err := raw.Conn(t.Context())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`)
	require.NoError(t, err)
	// Each run tries again within maxPoll, and its grant then waits for
	// the lock, up to its busy timeout (5 s): 2 s covers both tries.
	time.Sleep(2 * time.Second)
	_, err = conn.ExecContext(t.Context(), `UPDATE leases SET expires_at = 0 WHERE name = 'job'`)
	require.NoError(t, err)
	_, err = conn.ExecContext(context.Background(), `COMMIT`)
	require.NoError(t, err)

	for _, r := range runs {
		select {
		case err := <-r.exited:
			require.NoError(t, err, "stderr: %s", r.errOut.String())
		case <-time.After(2 * time.Minute):
			t.Fatalf("run did not end within 2 min: %s", r.errOut.String())
		}
	}
	log, err := os.ReadFile(logPath)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	require.Len(t, lines, 4, "%s", log)
	first := strings.TrimPrefix(lines[0], "start ")
	second := strings.TrimPrefix(lines[2], "start ")
	assert.Equal(t, []string{"start " + first, "end " + first, "start " + second, "end " + second}, lines,
		"the second run starts its command only after the first one's ended")
	assert.Equal(t, "2", first, "the first run's grant is new: token 2 (other's was 1)")
	assert.Equal(t, "3", second, "the second run's grant is new too, once the first released it")
}
