//go:build unix

package redistest

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// ownGroup starts cmd in a process group of its own, whose id is its pid.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// ask sends sig to p, and SIGCONT after it: a paused server cannot act on
// SIGTERM.
func ask(p *os.Process, sig syscall.Signal) {
	_ = p.Signal(sig)
	_ = p.Signal(syscall.SIGCONT)
}

// killGroup kills every process of group pgid and waits, up to startWait,
// until none is left.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for deadline := time.Now().Add(startWait); time.Now().Before(deadline); {
		if err := syscall.Kill(-pgid, 0); err != nil {
			return // no process of the group is left
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pause stops p (SIGSTOP); resume continues it (SIGCONT).
func pause(p *os.Process)  { _ = p.Signal(syscall.SIGSTOP) }
func resume(p *os.Process) { _ = p.Signal(syscall.SIGCONT) }
