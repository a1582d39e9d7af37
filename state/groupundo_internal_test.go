package state

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groupedBeside runs call, a caller's grouped verb, in one group with a
// verb after it whose statement the caller's context interrupts, as a
// request's context that ends while its verbs run: that verb fails
// mid-statement with the context's error, the group rolls back, and the
// caller's verb, to run again alone, finds its context ended. It returns
// call's error.
func groupedBeside(t *testing.T, db *DB, call func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db.mu.Lock() // the caller queues behind the lock the test holds
	answer := make(chan error, 1)
	go func() { answer <- call(ctx) }()
	for !db.q.waiting() {
		runtime.Gosched()
	}
	beside := &pending{ctx: ctx, a: grouped, wake: make(chan struct{}, 1), fn: func(int64) error {
		cancel() // the driver's answer to a statement its context interrupted
		return fmt.Errorf("statekit: %w", ctx.Err())
	}}
	db.q.push(beside)
	db.lead(beside) // runs the caller's verb and this one as one group, and unlocks
	require.ErrorIs(t, beside.err, context.Canceled, "the verb beside it")
	return <-answer
}

// TestGroupedRenewThatFailsLeavesTheLeaseAsItWas: a Renew run in a group
// that rolled back, and then not run alone (its context ended), returns
// its context's error and leaves the caller's *Lease as it was, as the
// file has it. Before, the group's rolled-back statement had moved
// l.Expires already: the holder read a deadline an hour on that the file
// never had, and could act past the lease's end.
func TestGroupedRenewThatFailsLeavesTheLeaseAsItWas(t *testing.T) {
	ctx := context.Background()
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	db, err := Open("/sim/renew.state", WithFS(faults.NewMemFS(1).Process(1)), WithClock(clock), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	l, err := db.Lease(ctx, "job", "a", time.Minute)
	require.NoError(t, err)
	was := *l

	err = groupedBeside(t, db, func(ctx context.Context) error { return db.Renew(ctx, l, time.Hour) })
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, was, *l, "a Renew that failed moved the caller's lease")
	clock.Advance(2 * time.Minute)
	assert.ErrorIs(t, db.Renew(ctx, l, time.Minute), ErrLeaseLost, "the file kept the old deadline")
}

// TestGroupedReleaseThatFailsLeavesTheLeaseAsItWas is the Release beside
// it: one that failed leaves the lease held, in the file and in the
// caller's *Lease alike.
func TestGroupedReleaseThatFailsLeavesTheLeaseAsItWas(t *testing.T) {
	ctx := context.Background()
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	db, err := Open("/sim/release.state", WithFS(faults.NewMemFS(1).Process(1)), WithClock(clock), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	l, err := db.Lease(ctx, "job", "a", time.Minute)
	require.NoError(t, err)
	was := *l

	err = groupedBeside(t, db, func(ctx context.Context) error { return db.Release(ctx, l) })
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, was, *l, "a Release that failed moved the caller's lease")
	assert.NoError(t, db.Renew(ctx, l, time.Minute), "the file kept the lease held")
}

// TestGroupedVerbThatFailsAnswersNothingElse: an Incr, CAS, Expire or Del
// run in a group that rolled back, and then not run alone (its context
// ended), returns its context's error and the zero value beside it, as any
// failed verb does, and wrote nothing. Before, it returned the answer of
// the rolled-back statement with the error: a CAS said it swapped, an
// Incr gave a count the file never held.
func TestGroupedVerbThatFailsAnswersNothingElse(t *testing.T) {
	ctx := context.Background()
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	db, err := Open("/sim/answers.state", WithFS(faults.NewMemFS(1).Process(1)), WithClock(clock), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set(ctx, "n", 5))

	var n int64
	err = groupedBeside(t, db, func(ctx context.Context) (err error) { n, err = db.Incr(ctx, "n"); return err })
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, n, "Incr")
	var swapped bool
	err = groupedBeside(t, db, func(ctx context.Context) (err error) { swapped, err = db.CAS(ctx, "n", 5, 6); return err })
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, swapped, "CAS")
	var set bool
	err = groupedBeside(t, db, func(ctx context.Context) (err error) { set, err = db.Expire(ctx, "n", time.Minute); return err })
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, set, "Expire")
	var deleted int
	err = groupedBeside(t, db, func(ctx context.Context) (err error) { deleted, err = db.Del(ctx, "n"); return err })
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, deleted, "Del")

	v, err := db.Get(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, IntValue(5), v, "a verb that failed wrote")
	left, err := db.TTL(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, NoExpiry, left, "an Expire that failed wrote")
}
