package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel send cmd SIGTERM if run dies, so a command
// never outlives the process that renews its lease.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
