//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing outside Linux: only Linux has a parent-death
// signal. If run dies, its command runs on without the lease.
func dieWithParent(*exec.Cmd) {}
