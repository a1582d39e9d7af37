//go:build linux

package state

import "golang.org/x/sys/unix"

// readOnlyFS reports whether the file system holding path is mounted
// read-only.
func readOnlyFS(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Flags&unix.ST_RDONLY != 0
}

// noRoomToCreate says what the file system holding dir has none of free to
// create a file with, "inodes" or "blocks", or "" when it has both (or
// cannot tell). SQLite, when it cannot create the -wal or -shm file, tries
// to open it for reading only and logs that call's ENOENT: the ENOSPC of
// the create is lost, so the engine asks the file system.
func noRoomToCreate(dir string) string {
	var st unix.Statfs_t
	switch {
	case unix.Statfs(dir, &st) != nil:
		return ""
	case st.Files > 0 && st.Ffree == 0:
		return "inodes"
	case st.Blocks > 0 && st.Bavail == 0:
		return "blocks"
	}
	return ""
}
