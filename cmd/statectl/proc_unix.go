//go:build unix

package main

import (
	"os"
	"syscall"
	"unsafe"
)

// forwardedSignals are the signals run passes on to its command.
var forwardedSignals = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2,
}

// terminate is the signal run sends its command when the lease is lost.
var terminate os.Signal = syscall.SIGTERM

// fromTerminal reports whether sig was most likely typed at the terminal
// and so already reached the command: INT or QUIT while run is used
// interactively, its stdin a terminal whose foreground process group is
// run's own, which the command shares.
func fromTerminal(sig os.Signal) bool {
	if sig != syscall.SIGINT && sig != syscall.SIGQUIT {
		return false
	}
	var fg int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(syscall.Stdin), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&fg)))
	return errno == 0 && int(fg) == syscall.Getpgrp()
}

// exitStatus is the status a shell would report for the process: its exit
// code, or 128+N when signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalStatus is the status for ending on sig, as a shell reports it.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitError
}
