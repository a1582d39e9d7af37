//go:build !unix

package state

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// errnoName returns "": names are shown on unix only.
func errnoName(syscall.Errno) string { return "" }

// dirRefusesWrites returns nil: directories are asked on unix only.
func dirRefusesWrites(string) error { return nil }

// writeProbe opens the file at path to read and write, as SQLite did
// before it fell back to reading it only, and returns why that fails (an
// *fs.PathError), or nil if it now works.
func writeProbe(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return &fs.PathError{Op: writeProbeOp, Path: pe.Path, Err: pe.Err}
		}
		return err
	}
	return f.Close()
}

// shmInUse reports false: other processes' locks are asked on unix only.
func shmInUse(interface{ Fd() uintptr }) bool { return false }
