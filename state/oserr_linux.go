//go:build linux

package state

import "golang.org/x/sys/unix"

// readOnlyFS reports whether the file system holding path is mounted
// read-only.
func readOnlyFS(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Flags&unix.ST_RDONLY != 0
}
