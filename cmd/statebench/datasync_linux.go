package main

import (
	"fmt"
	"os"
	"syscall"
)

const datasyncName = "fdatasync"

// datasync syncs f's data with fdatasync(2).
func datasync(f *os.File) error {
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("fdatasync: %w", err)
	}
	return nil
}
