package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/statekit/statekit/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScriptsRedis runs the real binary against a real redis-server the
// test starts (with a password, which no message may show):
// testdata/redis/*.txtar, with $URL the store's URL, $PREFIX its prefix,
// $BADPW the store's URL with a wrong password and $DOWN the URL of a port
// nothing listens on. "redis ARG..." sends one command to the server, as
// redis-cli would, and prints its reply.
func TestScriptsRedis(t *testing.T) {
	const password = "s3cret-pw"
	srv := redistest.Start(t, redistest.WithPassword(password))
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/redis",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("GORACE", strings.TrimSpace(env.Getenv("GORACE")+" atexit_sleep_ms=0"))
			// Each script its own prefix: the scripts share the server.
			prefix := filepath.Base(env.WorkDir) + ":"
			env.Setenv("URL", srv.URL(prefix))
			env.Setenv("PREFIX", prefix)
			env.Setenv("BADPW", strings.Replace(srv.URL(prefix), password, "wr0ng-pw", 1))
			env.Setenv("DOWN", "redis://127.0.0.1:"+strconv.Itoa(port)+"/0")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitcode,
			"waitfile": cmdWaitfile,
			"redis": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) == 0 {
					ts.Fatalf("usage: redis COMMAND [ARG...]")
				}
				reply, err := redistest.CommandText(srv.Addr(), password, args...)
				ts.Check(err)
				fmt.Fprintln(ts.Stdout(), reply)
			},
		},
	})
}

// TestRunEndsTheCommandWhenTheServerStopsAnswering: once CMD runs, the
// Redis server is stopped (SIGSTOP), so every renewal goes unanswered. A
// file's busy timeout bounds a renewal; over a URL the lease's end must,
// or a renewal waits for the client's read timeout (ten minutes in this
// URL) while CMD runs on without the lease. Once the ttl has run out
// without a renewal, run sends CMD SIGTERM and exits 76 saying why. CMD
// ends by itself after 60 s if it is never told; the test resumes the
// server after 90 s at most, so that run can end.
func TestRunEndsTheCommandWhenTheServerStopsAnswering(t *testing.T) {
	srv := redistest.Start(t, redistest.WithPassword("s3cret-pw"))
	url := srv.URL("run:") + "&read_timeout=10m"
	statectl := statectlCopy(t)
	started := filepath.Join(t.TempDir(), "started")
	cmd := exec.Command(statectl, "run", url, "--lease", "job", "--ttl", "3s", "--",
		"sh", "-c", `trap 'echo got TERM; kill -KILL $s; exit 7' TERM; sleep 60 >/dev/null 2>&1 & s=$!; touch "$1"; wait $s`, "sh", started)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	var out, errBuf lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errBuf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for i := 0; ; i++ {
		if _, err := os.Stat(started); err == nil {
			break
		}
		require.Less(t, i, 2000, "CMD did not start within 20s: %s", errBuf.String())
		time.Sleep(10 * time.Millisecond)
	}
	srv.Pause()
	t.Cleanup(srv.Resume)
	var err error
	select {
	case err = <-exited:
	case <-time.After(90 * time.Second):
		srv.Resume()
		err = <-exited
		t.Errorf("run did not end within 90s of the server stopping")
	}
	assert.Equal(t, exitLost, cmd.ProcessState.ExitCode(), "%v: %s", err, errBuf.String())
	assert.Equal(t, "got TERM\n", out.String(), "CMD was told to stop")
	assert.Contains(t, errBuf.String(), "renewals failed until the ttl ran out")
	assert.NotContains(t, errBuf.String(), "s3cret")
}
