package main

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/childproc"
)

// TestWorkerDiesWithStatebench SIGKILLs statebench, as a CI timeout or
// the OOM killer would, while a worker process spends its budget, and
// finds the worker gone: it would otherwise run its budget out.
func TestWorkerDiesWithStatebench(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), asParent+"="+t.TempDir())
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
		t.Fatalf("statebench printed no pid: %q %v", line, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		t.Fatalf("statebench printed %q", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // only if the test fails
	_ = parent.Process.Kill()
	_ = parent.Wait()
	// A cap for a loaded machine (a minute), not a speed target.
	for range 6000 {
		if !childproc.Running(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("worker %d still runs after statebench was killed", pid)
}
