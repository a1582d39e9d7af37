package sysclock

import (
	"syscall"
	"time"
)

// Precise sleeps d on the calling thread (nanosleep(2)): Go's timers
// wake a sleeper a millisecond or more late, which is most of a pause of
// the busy handler's first retries. It blocks the thread, not the process:
// the runtime runs other goroutines meanwhile.
func Precise(d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
