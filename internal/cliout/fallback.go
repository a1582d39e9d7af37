// Package cliout holds what statekit's commands share about writing their
// reports.
package cliout

import (
	"fmt"
	"io"
)

// FallbackWriter is a command's stdout: after its first failed write (a
// full disk, a closed pipe) it says so on Stderr and writes the rest of the
// report there, so that a violation and the line that runs it again are
// not lost. Err is that first error; a command whose run passed fails all
// the same when it is set, since its report is not where it was asked for.
type FallbackWriter struct {
	W, Stderr io.Writer
	Prog      string // the command's name, for the message on Stderr
	Err       error
}

// Write writes p to W until a write to W fails, and from then on to Stderr.
func (f *FallbackWriter) Write(p []byte) (int, error) {
	n := 0
	if f.Err == nil {
		var err error
		if n, err = f.W.Write(p); err == nil {
			return n, nil
		}
		f.Err = err
		fmt.Fprintf(f.Stderr, "%s: the report could not be written: %v; the rest of it follows here\n", f.Prog, err)
	}
	m, err := f.Stderr.Write(p[n:])
	return n + m, err
}
