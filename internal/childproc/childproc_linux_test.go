package childproc_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/childproc"
)

// asParent makes the test binary, re-executed, a parent: it starts a child
// (sleep) with Start, prints the child's pid and waits to be killed.
const asParent = "CHILDPROC_TEST_AS_PARENT"

// polls bounds the waits below: a cap for a loaded machine (polls times
// pollEvery, a minute), not a speed target.
const (
	polls     = 6000
	pollEvery = 10 * time.Millisecond
)

func TestMain(m *testing.M) {
	if os.Getenv(asParent) != "" {
		cmd := exec.Command("sleep", "3600")
		if err := childproc.Start(cmd); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
		_ = cmd.Wait()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestChildDiesWithItsParent SIGKILLs a parent that started a child with
// Start and finds the child gone.
func TestChildDiesWithItsParent(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), asParent+"=1")
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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // only if the test fails
	_ = parent.Process.Kill()
	_ = parent.Wait()
	for range polls {
		if !childproc.Running(pid) {
			return
		}
		time.Sleep(pollEvery)
	}
	t.Fatalf("child %d still runs after its parent was killed", pid)
}

// TestChildOutlivesTheThreadThatStartedIt starts a child from a goroutine
// locked to its thread, which Go ends when the goroutine returns: the
// kernel sends the parent-death signal when the thread that forked the
// child exits, so Start must not fork from the caller's thread. Once that
// thread is gone, a SIGTERM of ours must be what ends the child: a
// SIGKILL sent at the thread's exit would already be pending and win.
func TestChildOutlivesTheThreadThatStartedIt(t *testing.T) {
	for range 10 { // the main thread is never ended: try another
		cmd := exec.Command("sleep", "3600")
		tids := make(chan int, 1)
		errs := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			tids <- syscall.Gettid()
			errs <- childproc.Start(cmd)
		}()
		tid := <-tids
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if tid == os.Getpid() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			continue
		}
		gone := false
		for range polls {
			if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); errors.Is(err, os.ErrNotExist) {
				gone = true
				break
			}
			time.Sleep(pollEvery)
		}
		if !gone {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("thread %d did not end after its locked goroutine returned", tid)
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Fatalf("the child ended with %v, not our SIGTERM: it was killed when the thread that started it exited", cmd.ProcessState)
		}
		return
	}
	t.Skip("every try ran on the main thread")
}
