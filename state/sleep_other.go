//go:build !linux

package state

import "time"

// preciseSleep sleeps d; on Linux, on the thread (sleep_linux.go).
func preciseSleep(d time.Duration) { time.Sleep(d) }
