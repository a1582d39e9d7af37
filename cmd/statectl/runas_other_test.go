//go:build !unix

package main

import (
	"os/exec"
	"runtime"
	"testing"
)

// runAs fails the test: running a command as another user is Unix's.
func runAs(t *testing.T, _ *exec.Cmd, uid int) {
	t.Fatalf("running statectl as user %d needs Unix, not %s", uid, runtime.GOOS)
}
