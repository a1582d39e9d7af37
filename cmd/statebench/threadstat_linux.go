package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadStat is what the operating system counts for the calling thread:
// its CPU time and its context switches, voluntary (it blocked: I/O, a
// lock, a sleep) and involuntary (the scheduler gave its CPU to another
// thread or process).
type threadStat struct {
	tid        int
	cpu        time.Duration
	vol, invol int64
}

// readThreadStat reads the calling thread's counters; ok is false if the
// system cannot tell.
func readThreadStat() (s threadStat, ok bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return s, false
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return s, false
	}
	return threadStat{tid: unix.Gettid(), cpu: time.Duration(ts.Nano()),
		vol: ru.Nvcsw, invol: ru.Nivcsw}, true
}
