// Package backend is the registry through which a package such as
// redisstate makes state.Open accept its URLs, as database/sql drivers
// register themselves: a program that never imports the backend's package
// links none of its code.
//
// The registry holds functions of type Opener. What an Opener returns must
// implement the state package's (unexported) remote interface, whose methods
// are documented in state/remote.go; state.Open checks that it does and
// fails naming the scheme when it does not.
//
// It also holds what state, a backend and statekit's commands must read
// the same way in a backend's URL: where its user info ends (UserInfoAt),
// whether its password needs escaping (UnescapedUserInfo), and the URL as
// every message shows it, without its password (RedactURL).
package backend

import (
	"slices"
	"sync"
	"time"
)

// Options are the state.Open options that mean something to a backend.
type Options struct {
	// FlushInterval is how often buffered increments are flushed in the
	// background; zero when background work is off.
	FlushInterval time.Duration
	// SyncFull is state.WithSync(state.SyncFull): every write must be
	// durable before it is answered. A backend that cannot make it so
	// refuses the write (state.ErrNotDurable) rather than answer it.
	SyncFull bool
	// BusyTimeout is state.WithBusyTimeout (state.DefaultBusyTimeout
	// unless set): how long a verb may wait for what another client holds
	// before it fails. Zero never waits. For a Redis Cluster it bounds the
	// wait for a slot moving between masters.
	BusyTimeout time.Duration
}

// Opener opens the store named by url (its scheme is the one registered) and
// returns the value state uses as its backend, or an error saying why not.
type Opener func(url string, o Options) (any, error)

var (
	mu      sync.RWMutex
	openers = map[string]Opener{}
)

// Register makes state.Open hand URLs with scheme (as "redis", without
// "://") to open. It panics if scheme is registered twice.
func Register(scheme string, open Opener) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("statekit: backend registered twice for " + scheme)
	}
	openers[scheme] = open
}

// Lookup returns the opener registered for scheme.
func Lookup(scheme string) (Opener, bool) {
	mu.RLock()
	defer mu.RUnlock()
	o, ok := openers[scheme]
	return o, ok
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	s := make([]string, 0, len(openers))
	for k := range openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}
