package main

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"statectl": main,
	})
}

// TestScripts runs the real binary on real files: testdata/script/*.txtar.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			// A -race binary sleeps a second at exit unless told not to;
			// the scripts run statectl a few hundred times.
			env.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"mkfile":   cmdMkfile,
			"stamp":    cmdStamp,
			"waitfile": cmdWaitfile,
			"exitcode": cmdExitcode,
		},
	})
}

// cmdMkfile makes a file statectl must handle: mkfile KIND FILE.
//
//	foreign  an SQLite database of another application
//	newer    a statekit file with a newer schema version
//	future   a statekit file whose high-water mark is an hour ahead
//	broken   a statekit file whose rows break statekit's invariants
func cmdMkfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mkfile foreign|newer|future|broken FILE")
	}
	path := ts.MkAbs(args[1])
	var query string
	switch args[0] {
	case "foreign":
		query = `CREATE TABLE notes(body TEXT); INSERT INTO notes VALUES ('hello')`
	case "newer":
		query = fmt.Sprintf(`PRAGMA user_version = %d`, state.SchemaVersion+1)
	case "future":
		query = fmt.Sprintf(`UPDATE meta SET v = %d WHERE k = 'hwm'`, time.Now().Add(time.Hour).UnixMilli())
	case "broken":
		query = `INSERT INTO kv(key, value, expires_at) VALUES ('session:9', X'78', -5);
INSERT INTO leases(name, owner, token, expires_at) VALUES ('nightly', 'web-1', 0, 0)`
	default:
		ts.Fatalf("mkfile: unknown kind %q", args[0])
	}
	if args[0] != "foreign" {
		db, err := state.Open(path, state.WithoutBackground())
		ts.Check(err)
		ts.Check(db.Close())
	}
	raw, err := sql.Open("sqlite", "file:"+path)
	ts.Check(err)
	defer raw.Close()
	_, err = raw.Exec(query)
	ts.Check(err)
}

// cmdStamp writes FILE's size, modification time and SHA-256 to OUT, or
// "absent": stamp FILE OUT. Two stamps compare with cmp.
func cmdStamp(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: stamp FILE OUT")
	}
	line := "absent\n"
	fi, err := os.Stat(ts.MkAbs(args[0]))
	switch {
	case err == nil:
		line = fmt.Sprintf("size %d mtime %s sha256 %x\n", fi.Size(), fi.ModTime().Format(time.RFC3339Nano),
			sha256.Sum256([]byte(ts.ReadFile(args[0]))))
	case !errors.Is(err, os.ErrNotExist):
		ts.Fatalf("stamp: %v", err)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(line), 0o644))
}

// cmdWaitfile waits until every FILE exists, for at most 20 seconds:
// waitfile FILE...
func cmdWaitfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: waitfile FILE...")
	}
	for _, name := range args {
		for i := 0; ; i++ {
			if _, err := os.Stat(ts.MkAbs(name)); err == nil {
				break
			}
			if i == 2000 {
				ts.Fatalf("waitfile: %s did not appear in 20s", name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// cmdExitcode runs a program and checks its exit status, keeping its
// output for stdout and stderr: exitcode N PROGRAM ARGS...
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N PROGRAM ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exitcode: %v", err)
	}
	if got != want {
		ts.Fatalf("exit status %d, want %d", got, want)
	}
}

// statectlCopy copies the test binary (statectl's main when called by that
// name, see TestMain) where any user can run it, and returns its path.
func statectlCopy(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	bin := publicTempDir(t)
	statectl := filepath.Join(bin, "statectl")
	copyExecutable(t, self, statectl)
	return statectl
}

// publicTempDir returns a new directory (mode 0755) every user can reach,
// removed at the end of the test (t.TempDir's parent only its owner can).
func publicTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "statectl-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

// copyExecutable copies the file at src to dst with mode 0755.
func copyExecutable(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// runStatectl runs statectl with TMPDIR tmp, as the user uid unless it is
// negative, and returns its stdout, stderr and exit status.
func runStatectl(t *testing.T, statectl, tmp string, uid int, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(statectl, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "GORACE=atexit_sleep_ms=0")
	if uid >= 0 {
		runAs(t, cmd, uid)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := exitCode(t, cmd.Run())
	return out.String(), errOut.String(), code
}

// exitCode is the exit status of a command that ran and returned err, and
// fails the test if it could not run.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}
