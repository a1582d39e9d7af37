//go:build !unix

package redistest

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// ownGroup does nothing: this OS has no process groups to kill at once,
// so what the server forked may outlive it.
func ownGroup(*exec.Cmd) {}

// ask kills p: this OS delivers no other signal, so a Stop here is a Kill
// and the server writes nothing more before it exits.
func ask(p *os.Process, _ syscall.Signal) { _ = p.Kill() }

// killGroup does nothing: ask killed the server, and it has no group.
func killGroup(int) {}

// pause and resume need SIGSTOP and SIGCONT, which this OS lacks.
func pause(*os.Process)  { panic("redistest: Pause needs SIGSTOP, which " + runtime.GOOS + " lacks") }
func resume(*os.Process) { panic("redistest: Resume needs SIGCONT, which " + runtime.GOOS + " lacks") }
