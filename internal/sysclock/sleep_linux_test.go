package sysclock

import (
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadSlack reads the calling thread's timer slack.
func threadSlack(t *testing.T) int {
	t.Helper()
	ns, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		t.Fatalf("PR_GET_TIMERSLACK: %v", err)
	}
	return ns
}

// TestPreciseLeavesTheThreadsSlack: Precise sleeps with the thread's timer
// slack at 1 ns and puts the default back after, so that other sleeps on
// the thread (the runtime's) keep it.
func TestPreciseLeavesTheThreadsSlack(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadSlack(t)
	Precise(time.Microsecond)
	if after := threadSlack(t); after != before {
		t.Fatalf("the thread's timer slack is %d ns after Precise, %d before", after, before)
	}
}

// BenchmarkPause compares a 50 µs pause of Precise with a plain
// nanosleep(2) of the same length at the thread's default timer slack:
// ns/op is what the pause took.
func BenchmarkPause(b *testing.B) {
	const d = 50 * time.Microsecond
	b.Run("precise", func(b *testing.B) {
		for b.Loop() {
			Precise(d)
		}
	})
	b.Run("nanosleep", func(b *testing.B) {
		for b.Loop() {
			ts := syscall.NsecToTimespec(d.Nanoseconds())
			for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
			}
		}
	})
}
