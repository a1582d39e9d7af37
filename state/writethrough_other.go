//go:build !linux

package state

import "os"

// writeThrough writes past the page cache where the system has a way to
// (writethrough_linux.go); here it reports that it could not.
func writeThrough(*os.File, []byte, int64) (bool, error) { return false, nil }

// unwritten reports whether any block of f is marked unwritten, where the
// system can tell (writethrough_linux.go); here it cannot.
func unwritten(*os.File) bool { return false }
