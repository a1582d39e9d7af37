package state

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGroupAnswersItsNormalVerbsBeforeTheGrantsSync runs a group of a grant
// and a Set, with a second Set queued meanwhile (the next verb of a caller
// the group answers). The first Set is answered before the grant's
// transaction runs and before any sync; the queued Set joins the grant's
// FULL commit; and one power loss later all three are there: the grant's
// sync made the Set committed before it durable too.
func TestGroupAnswersItsNormalVerbsBeforeTheGrantsSync(t *testing.T) {
	ctx := context.Background()
	m := faults.NewMemFS(3)
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(pid int) *DB {
		db, err := Open("/sim/split.state", WithFS(m.Process(pid)), WithClock(clock), WithoutBackground())
		require.NoError(t, err)
		return db
	}
	db := open(1)
	require.NoError(t, db.Set(ctx, "warmup", 1))

	var granted *Lease
	grant := &pending{ctx: ctx, a: grouped, full: true, fn: func(now int64) (err error) {
		granted, err = db.lease(ctx, now, "job", "a", time.Minute.Milliseconds())
		return err
	}}
	early := &pending{ctx: ctx, a: grouped, fn: func(now int64) error {
		return db.set(ctx, now, "early", IntValue(1), 0)
	}}
	var earlyAnswered bool
	var syncsBeforeLate int64
	late := &pending{ctx: ctx, a: grouped, fn: func(now int64) error {
		earlyAnswered = early.state.Load() == opDone
		syncsBeforeLate = m.Stats().Syncs
		return db.set(ctx, now, "late", IntValue(2), 0)
	}}
	for _, p := range []*pending{grant, early, late} {
		p.wake = make(chan struct{}, 1)
	}

	db.mu.Lock()
	db.q.push(late)
	syncs := m.Stats().Syncs
	db.runGroup([]*pending{grant, early})
	db.mu.Unlock()

	for name, p := range map[string]*pending{"grant": grant, "early": early, "late": late} {
		require.Equal(t, opDone, p.state.Load(), "%s did not run", name)
		require.NoError(t, p.err, name)
	}
	assert.True(t, earlyAnswered, "the Set was not answered before the grant's transaction ran")
	assert.Equal(t, syncs, syncsBeforeLate, "something synced before the grant's transaction: the Set's commit was not NORMAL")
	assert.Greater(t, m.Stats().Syncs, syncs, "the grant's commit did not sync")
	assert.False(t, db.q.waiting(), "the queued Set was left for a later group")

	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	db2 := open(2)
	defer db2.Close()
	for _, key := range []string{"early", "late"} {
		_, err := db2.Get(ctx, key)
		assert.NoError(t, err, "%s was lost to the power loss after the grant's sync", key)
	}
	_, err := db2.Lease(ctx, "job", "b", time.Second)
	assert.True(t, errors.Is(err, ErrLeaseHeld), "the grant (token %d) was lost to the power loss: %v", granted.Token, err)
}

// TestGrantsGatherTheGrantsCalledBesideThem runs a grant alone while a
// second caller is about to queue a grant of its own: it does so in the
// first yield, as a caller just answered and waking would. The first grant
// yields before its transaction, sees the queue grow, yields again, sees
// nothing new, and takes the second into its group: the two share one
// sync. Without the yields it fails; the yield itself is replaced, since
// which goroutine runs in a real one is the Go scheduler's choice.
func TestGrantsGatherTheGrantsCalledBesideThem(t *testing.T) {
	ctx := context.Background()
	m := faults.NewMemFS(5)
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	db, err := Open("/sim/gather.state", WithFS(m.Process(1)), WithClock(clock), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set(ctx, "warmup", 1))

	grant := func(name string) *pending {
		return &pending{ctx: ctx, a: grouped, full: true, wake: make(chan struct{}, 1), fn: func(now int64) error {
			_, err := db.lease(ctx, now, name, "o", time.Minute.Milliseconds())
			return err
		}}
	}
	first, second := grant("a"), grant("b")

	yields := 0
	defer func(y func()) { gatherYield = y }(gatherYield)
	gatherYield = func() {
		yields++
		if yields == 1 {
			db.q.push(second)
		}
	}

	db.mu.Lock()
	syncs := m.Stats().Syncs
	db.runGroup([]*pending{first})
	after := m.Stats().Syncs
	db.mu.Unlock()

	require.Equal(t, opDone, first.state.Load())
	require.NoError(t, first.err)
	assert.Equal(t, opDone, second.state.Load(), "the grant queued beside the first was left for a sync of its own")
	assert.NoError(t, second.err)
	assert.Equal(t, syncs+1, after, "two grants in one group did not share one sync")
	assert.Equal(t, 2, yields, "the group did not stop yielding once a yield brought no new grant")
	assert.False(t, db.q.waiting())
}
