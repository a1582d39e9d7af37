//go:build unix

package stress

import (
	"errors"
	"os/exec"
	"syscall"
)

// ownGroup puts a worker in a process group of its own, so the SIGINT a
// terminal sends the driver's group on Ctrl-C does not kill it as it runs
// (it would count as a worker that exited by itself): the driver, told to
// stop, stops its workers by closing their stdin.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalled reports whether a worker's exit error says SIGINT or SIGTERM
// ended it: someone interrupted the run (a Ctrl-C reaches a worker still
// in the driver's group as it is started).
func signalled(exitErr error) bool {
	var exit *exec.ExitError
	if !errors.As(exitErr, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGINT || ws.Signal() == syscall.SIGTERM)
}
