//go:build !linux

package main

import (
	"fmt"
	"os"
)

const datasyncName = "fsync"

// datasync syncs f with fsync where fdatasync is not available.
func datasync(f *os.File) error {
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	return nil
}
