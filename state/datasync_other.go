//go:build !linux

package state

import "os"

// datasync syncs f with fsync(2): not every system has fdatasync.
func datasync(f *os.File) error { return f.Sync() }
