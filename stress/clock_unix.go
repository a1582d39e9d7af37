//go:build unix

package stress

import "golang.org/x/sys/unix"

// monotonicNanos reads CLOCK_MONOTONIC: one clock every process of the
// machine shares, so call and return times of different workers compare.
func monotonicNanos() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("stress: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}
