//go:build linux

package state

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync syncs f's data with fdatasync(2), as SQLite does here.
func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
