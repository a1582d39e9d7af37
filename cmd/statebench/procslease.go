package main

import (
	"context"
	"fmt"
	"time"

	"github.com/statekit/statekit/state"
)

// modeLease makes a worker process call Lease and Release of its key in
// pairs (procRun.lease): lease grants from several processes on one file.
const modeLease = "lease"

// mode is the worker's -mode for r.
func (r procRun) mode() string {
	if r.lease {
		return modeLease
	}
	return "incr"
}

// leasePair returns a call that grants the lease key to this worker and
// releases it: one pair.
func leasePair(ctx context.Context, db *state.DB, key string) func() error {
	return func() error {
		l, err := db.Lease(ctx, key, "bench", time.Minute)
		if err != nil {
			return err
		}
		return db.Release(ctx, l)
	}
}

// count returns what the file at path says the calls on key added up to:
// the increments, or for Lease+Release pairs the lease's last token (a
// fresh name starts at 1, and each grant after a release is the next).
func (r procRun) count(e *env, path, key string) (int64, error) {
	if !r.lease {
		return readInt(e, path, key)
	}
	db, err := state.Open(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var token int64
	found := false
	err = db.Leases(e.ctx, true, func(l state.LeaseInfo) error {
		if l.Name == key {
			token, found = l.Token, true
		}
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("lease %s is not in %s", key, path)
	}
	return token, err
}
