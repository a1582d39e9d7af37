//go:build !unix

package state

import "syscall"

// errnoName returns "": names are shown on unix only.
func errnoName(syscall.Errno) string { return "" }

// dirRefusesWrites returns nil: directories are asked on unix only.
func dirRefusesWrites(string) error { return nil }

// shmInUse reports false: other processes' locks are asked on unix only.
func shmInUse(interface{ Fd() uintptr }) bool { return false }
