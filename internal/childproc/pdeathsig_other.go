//go:build !linux

package childproc

import "os/exec"

// start starts cmd: only Linux has a parent-death signal, so elsewhere a
// child may outlive a parent that was killed.
func start(cmd *exec.Cmd) error { return cmd.Start() }
