//go:build !linux

package state

// readOnlyFS reports false: only Linux is asked whether a file system is
// mounted read-only.
func readOnlyFS(string) bool { return false }
