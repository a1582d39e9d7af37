//go:build unix

package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCtrlCStopsTheRunAndReports: Ctrl-C in a terminal sends SIGINT to
// the whole foreground process group. The workers, started in a group of
// their own, go on until the driver stops them, so none counts as a
// worker that exited by itself; the run is checked and reported. SIGTERM
// to statestress alone (kill PID) does the same.
func TestCtrlCStopsTheRunAndReports(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, c := range []struct {
		sig   syscall.Signal
		group bool
	}{{syscall.SIGINT, true}, {syscall.SIGTERM, false}} {
		dir := t.TempDir()
		cmd := exec.Command(exe, "-procs", "2", "-duration", "5m", "-kill-every", "20ms", "-v", "-seed", "5", "-dir", dir)
		cmd.Env = append(os.Environ(), asMain+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a foreground group of its own, as a shell makes
		var out bytes.Buffer
		cmd.Stdout = &out
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		var errs strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() { // until the driver has killed a worker and started its successor
			errs.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "stress: killed ") {
				break
			}
		}
		pid := cmd.Process.Pid
		if c.group {
			pid = -pid
		}
		require.NoError(t, syscall.Kill(pid, c.sig))
		rest, _ := io.ReadAll(stderr)
		errs.Write(rest)
		err = cmd.Wait()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%v: %s%s", c.sig, out.String(), errs.String())
		assert.Equal(t, exitUsage, exit.ExitCode(), "%v: %s%s", c.sig, out.String(), errs.String())
		assert.Contains(t, out.String(), "stopped because it was interrupted", c.sig)
		assert.Contains(t, out.String(), "violations:  0\n", "%v: no worker died of the signal", c.sig)
		runs, err := filepath.Glob(filepath.Join(dir, "statestress-*"))
		require.NoError(t, err)
		assert.Len(t, runs, 1, "%v: an interrupted run keeps its files", c.sig)
	}
}
