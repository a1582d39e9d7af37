//go:build !unix

package stress

import "os/exec"

// ownGroup does nothing outside unix, where a run cannot start (see
// monotonicNanos).
func ownGroup(*exec.Cmd) {}

// signalled reports false: outside unix no run starts.
func signalled(error) bool { return false }
