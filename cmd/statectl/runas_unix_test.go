//go:build unix

package main

import (
	"os/exec"
	"syscall"
	"testing"
)

// runAs makes cmd run as the user and group uid.
func runAs(_ *testing.T, cmd *exec.Cmd, uid int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
}
