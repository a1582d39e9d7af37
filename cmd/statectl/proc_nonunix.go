//go:build !unix

package main

import "os"

// forwardedSignals are the signals run passes on to its command.
var forwardedSignals = []os.Signal{os.Interrupt}

// terminate is what run sends its command when the lease is lost.
var terminate os.Signal = os.Kill

func fromTerminal(os.Signal) bool { return false }

func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }

func signalStatus(os.Signal) int { return exitError }
