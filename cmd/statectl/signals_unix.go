//go:build unix

package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A read command reads a file no process has open from a private copy in
// $TMPDIR, as large as the file and holding its data, which closeDB
// removes. A signal that ends statectl must not leave it behind: ^C, kill
// or a closed terminal, and most often SIGPIPE (statectl dump app.state |
// head closes the pipe under statectl). Nor may a write command die at its
// answer (statectl incr app.state n | true) with the file open, leaving it
// as a crashed writer leaves it. So a write to a closed pipe fails with
// EPIPE instead of killing statectl at once: the command ends, closes its
// file and removes its copy, then statectl dies of SIGPIPE all the same
// (dieOfBrokenPipe). And while a copy exists, SIGHUP, SIGINT and SIGTERM
// remove it before statectl dies of them.

// catchBrokenPipe has a write to a closed pipe fail with EPIPE rather than
// kill statectl.
func catchBrokenPipe() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// dieOfBrokenPipe ends statectl by SIGPIPE, as a write to a closed pipe on
// stdout does a program that does not catch it, so a shell reports the
// pipeline as it always has. It returns only if that fails.
func dieOfBrokenPipe() {
	signal.Reset(syscall.SIGPIPE)
	// The runtime ignores a SIGPIPE sent with kill; it dies of one when a
	// write to stdout fails with EPIPE. Make stdout a pipe with no reader
	// (the real one may have found a reader again, a FIFO can) and write.
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	r.Close()
	if err := unix.Dup2(int(w.Fd()), 1); err != nil {
		return
	}
	_, _ = os.Stdout.Write([]byte{'\n'})
}

var copySignals sync.Once

// removeCopiesOnSignal has SIGHUP, SIGINT and SIGTERM remove the private
// copies before statectl dies of them, as it would have. A signal ignored
// when statectl started (nohup, a background job) stays ignored.
func removeCopiesOnSignal() {
	copySignals.Do(func() {
		var sigs []os.Signal
		for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM} {
			if !signal.Ignored(sig) {
				sigs = append(sigs, sig)
			}
		}
		if len(sigs) == 0 {
			return
		}
		c := make(chan os.Signal, 1)
		signal.Notify(c, sigs...)
		go func() {
			sig := (<-c).(syscall.Signal)
			removeAllCopyDirs()
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig)
			// The signal ends the process as it is delivered; should it
			// not, end with the status a shell shows for it.
			time.Sleep(time.Second)
			os.Exit(signalStatus(sig))
		}()
	})
}
