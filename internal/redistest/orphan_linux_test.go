package redistest_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/childproc"
	"github.com/statekit/statekit/internal/redistest"
)

// asParent makes the test binary, re-executed, a program that launches a
// redis-server in the directory the variable names, prints its pid and
// runs until it is killed (as statestress -redis does).
const asParent = "REDISTEST_TEST_AS_PARENT"

func TestMain(m *testing.M) {
	if dir := os.Getenv(asParent); dir != "" {
		s, err := redistest.Launch(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(s.PID())
		for {
			time.Sleep(time.Hour)
		}
	}
	os.Exit(m.Run())
}

// TestServerDiesWithItsParent SIGKILLs a program that launched a
// redis-server, as a CI timeout or the OOM killer would, and finds the
// server gone: no deferred Close ran, and the server is in a process group
// of its own, so only the parent-death signal ends it.
func TestServerDiesWithItsParent(t *testing.T) {
	if redistest.Binary() == "" {
		t.Skip("redis-server not installed")
	}
	dir := t.TempDir()
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), asParent+"="+dir)
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("parent printed no pid: %q %v", line, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		t.Fatalf("parent printed %q", line)
	}
	// Only when the test fails: the server's group, before TempDir's
	// removal (cleanups run last first).
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	_ = parent.Process.Kill()
	_ = parent.Wait()
	// A cap for a loaded machine (a minute), not a speed target.
	for range 6000 {
		if !childproc.Running(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("redis-server %d still runs after the program that launched it was killed", pid)
}
