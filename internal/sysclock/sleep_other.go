//go:build !linux

package sysclock

import "time"

// Precise sleeps d; on Linux, on the thread (sleep_linux.go).
func Precise(d time.Duration) { time.Sleep(d) }
