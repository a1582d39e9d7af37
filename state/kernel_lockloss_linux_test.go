//go:build linux

package state_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func init() {
	helperRoles["kernel-lockloss"] = helperLockLoss
}

// TestKernelLocksLostUnderAHandle: a file system that stops granting POSIX
// locks under an open handle (a network file system whose lock service
// stopped: ENOLCK) makes the next verb ErrIO wrapping ENOLCK and saying so,
// once SQLite's own retries of the WAL index's read lock are spent (about
// 10 s), not an unnamed "locking protocol (15)"; the handle ends, so the
// verbs after it fail at once, and Close returns without waiting out
// SQLite's retries again (it leaves the WAL as it is: another process may
// be writing the file). strace attaches to the helper once its handle is
// open and fails every lock call on the file and its -shm with ENOLCK.
// The helper marks each step with an F_GETFD on the file, which the trace
// shows; the test counts the failed lock calls of the helper's thread in
// each step.
func TestKernelLocksLostUnderAHandle(t *testing.T) {
	strace := needStrace(t)
	needAttach(t, strace)
	path := filepath.Join(t.TempDir(), "l.state")
	cmd, stdin, out := startHelper(t, "kernel-lockloss", path, nil, "")
	tid := expectLine(t, out, "ready")
	trace := filepath.Join(t.TempDir(), "strace.out")
	st := exec.Command(strace, "-f", "-qq", "-o", trace, "-P", path, "-P", path+"-shm", "-e", "trace=fcntl",
		"-e", "inject=fcntl:error=ENOLCK", "-p", strconv.Itoa(cmd.Process.Pid))
	st.Stderr = os.Stderr
	require.NoError(t, st.Start())
	t.Cleanup(func() { _ = st.Process.Kill(); _ = st.Wait() })
	waitTraced(t, cmd.Process.Pid)
	_, err := fmt.Fprintln(stdin, "go")
	require.NoError(t, err)

	set := expectLine(t, out, "set")
	assert.Equal(t, "io=true busy=false enolck=true", expectLine(t, out, "kinds"), set)
	assert.True(t, strings.HasPrefix(set, path+`: set "k": `), set)
	assert.Contains(t, set, "stopped granting locks")
	get := expectLine(t, out, "get")
	assert.Contains(t, get, "the handle failed earlier", "the verb after it")
	assert.Contains(t, get, "ENOLCK")
	assert.Equal(t, "<nil>", expectLine(t, out, "close"))
	require.NoError(t, cmd.Wait())
	t.Logf("set: %s", set)

	// The failed lock calls of the helper's thread, step by step.
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	steps := map[int]int{}
	step := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != tid {
			continue
		}
		switch {
		case strings.Contains(line, "F_GETFD"):
			step++
		case strings.Contains(line, "(INJECTED)"):
			steps[step]++
		}
	}
	require.Equal(t, 4, step, "the helper's marks in the trace")
	t.Logf("failed lock calls: set %d, get %d, close %d", steps[1], steps[2], steps[3])
	assert.Greater(t, steps[1], 100, "the set met the refused locks: SQLite's retries")
	assert.Zero(t, steps[2], "the get after it tried the file")
	assert.Less(t, steps[3], 10, "Close waited out SQLite's retries again")
}

// needAttach skips the test when strace cannot attach to a running
// process here (ptrace restricted to a tracer's own children).
func needAttach(t *testing.T, strace string) {
	t.Helper()
	sleep := exec.Command("sleep", "1")
	if err := sleep.Start(); err != nil {
		t.Skipf("no sleep to attach strace to: %v", err)
	}
	defer func() { _ = sleep.Wait() }()
	if out, err := exec.Command(strace, "-qq", "-o", "/dev/null", "-p", strconv.Itoa(sleep.Process.Pid)).CombinedOutput(); err != nil {
		t.Skipf("strace cannot attach to a running process here (ptrace restricted?): %v: %s", err, out)
	}
}

// waitTraced waits until every thread of process pid has a tracer.
func waitTraced(t *testing.T, pid int) {
	t.Helper()
	for i := 0; ; i++ {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		require.NoError(t, err)
		traced := 0
		for _, e := range ents {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, e.Name()))
			if err == nil && !strings.Contains(string(b), "TracerPid:\t0\n") {
				traced++
			}
		}
		if traced == len(ents) {
			return
		}
		require.Less(t, i, 1000, "strace attached to %d of %d threads", traced, len(ents))
		time.Sleep(10 * time.Millisecond)
	}
}

// helperLockLoss opens path and writes, says "ready" with its thread's
// id, waits for a line on stdin (strace attached), then sets, gets and
// closes, saying what each gave, each step marked by an F_GETFD on the
// file for the trace.
func helperLockLoss(path string) int {
	runtime.LockOSThread() // the verbs' lock calls on this one thread
	ctx := context.Background()
	db, err := state.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	if err := db.Set(ctx, "k", 1); err != nil {
		fmt.Fprintln(os.Stderr, "set:", err)
		return 3
	}
	marker, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer marker.Close()
	mark := func() { _, _ = unix.FcntlInt(marker.Fd(), unix.F_GETFD, 0) }
	fmt.Println("ready", syscall.Gettid())
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 3
	}
	mark()
	err = db.Set(ctx, "k", 2)
	mark()
	fmt.Println("set", err)
	fmt.Printf("kinds io=%v busy=%v enolck=%v\n", errors.Is(err, state.ErrIO), errors.Is(err, state.ErrBusy),
		errors.Is(err, syscall.ENOLCK))
	_, err = db.Get(ctx, "k")
	mark()
	fmt.Println("get", err)
	err = db.Close()
	mark()
	fmt.Println("close", err)
	return 0
}
