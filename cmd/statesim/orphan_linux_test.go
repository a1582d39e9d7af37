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

// TestWorkersDieWithStatesim SIGKILLs statesim -parallel 2, as a CI
// timeout or the OOM killer would, while its workers are in their seeds,
// and finds the workers gone. A worker ends when its input does only once
// its seed is done, which may be minutes away (these never are).
func TestWorkersDieWithStatesim(t *testing.T) {
	sim := exec.Command(os.Args[0], "-seeds", "4", "-ops", "20", "-parallel", "2")
	sim.Env = append(os.Environ(), asStatesim+"=1", workerHangs+"=1")
	errOut, err := sim.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	sc := bufio.NewScanner(errOut)
	for len(pids) < 2 && sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "worker pid "); ok {
			pid, err := strconv.Atoi(p)
			if err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // only if the test fails
		}
	}
	_ = sim.Process.Kill()
	_ = sim.Wait()
	if len(pids) < 2 {
		t.Fatalf("statesim started %d workers, not 2: %v", len(pids), sc.Err())
	}
	for _, pid := range pids {
		// A cap for a loaded machine (a minute), not a speed target.
		for i := 0; childproc.Running(pid); i++ {
			if i == 6000 {
				t.Fatalf("worker %d still runs after statesim was killed", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
