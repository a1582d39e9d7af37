//go:build !linux

package main

import "time"

// threadStat is what the operating system counts for the calling thread;
// read on Linux only.
type threadStat struct {
	tid        int
	cpu        time.Duration
	vol, invol int64
}

// readThreadStat reports that this system cannot tell.
func readThreadStat() (threadStat, bool) { return threadStat{}, false }
