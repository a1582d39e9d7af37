//go:build !unix

package main

// catchBrokenPipe does nothing outside unix: there is no SIGPIPE.
func catchBrokenPipe() {}

// dieOfBrokenPipe does nothing outside unix.
func dieOfBrokenPipe() {}

// removeCopiesOnSignal does nothing outside unix: closeDB alone removes the
// private copies.
func removeCopiesOnSignal() {}
