package main

import (
	"fmt"
	"io"
	"strconv"
)

// count is n and the noun for n of them, one or many: "1 worker",
// "2 workers".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// fallbackWriter is stdout: after its first failed write (a full disk, a
// closed pipe) it says so on stderr and writes the rest of the report
// there, so a violation's replay line is not lost; run then fails a run
// that passed, since its report was not written where it was asked for.
type fallbackWriter struct {
	w, stderr io.Writer
	err       error
}

func (f *fallbackWriter) Write(p []byte) (int, error) {
	n := 0
	if f.err == nil {
		var err error
		if n, err = f.w.Write(p); err == nil {
			return n, nil
		}
		f.err = err
		fmt.Fprintf(f.stderr, "statesim: the report could not be written: %v; the rest of it follows here\n", err)
	}
	m, err := f.stderr.Write(p[n:])
	return n + m, err
}
