// Package lockwait lets statekit's own benchmark choose how the engine
// waits for another process's write lock, so that cmd/statebench can run
// the engine's schedule beside SQLite's in one run. It is internal: no
// application can set it. The setting is process-wide and read by Open;
// the zero value is the engine's default.
package lockwait

import "sync/atomic"

// Schedule is how a handle's busy handler spaces its retries.
type Schedule int32

const (
	// Default is the engine's schedule (state/busy.go): sub-millisecond
	// first retries, growing to a small cap.
	Default Schedule = iota
	// SQLite is SQLite's default schedule: 1, 2, 5, 10 ... 100 ms apart.
	SQLite
)

var current atomic.Int32

// Set makes every handle opened after it use s.
func Set(s Schedule) { current.Store(int32(s)) }

// Get returns the schedule handles open with.
func Get() Schedule { return Schedule(current.Load()) }
