//go:build !unix

package stress

// monotonicNanos has no clock shared across processes outside unix.
func monotonicNanos() int64 { panic("stress: needs CLOCK_MONOTONIC, a unix system") }
