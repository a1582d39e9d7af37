//go:build !linux

package state

// readOnlyFS reports false: only Linux is asked whether a file system is
// mounted read-only.
func readOnlyFS(string) bool { return false }

// noRoomToCreate returns "": only Linux is asked for free inodes and blocks.
func noRoomToCreate(string) string { return "" }
