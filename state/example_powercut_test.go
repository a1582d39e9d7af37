package state_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
)

// Example_powerCut tests an application's own use of statekit against a
// power cut: the file lives on a simulated disk (faults.MemFS) and the
// clock is one the test steps. A lease grant commits durably, so it
// survives; an Incr after it commits with SyncNormal, so the cut may take
// it back (LossDrop drops every write not synced).
func Example_powerCut() {
	ctx := context.Background()
	disk := faults.NewMemFS(1)
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(pid int) *state.DB {
		db, err := state.Open("app.state", state.WithFS(disk.Process(pid)), state.WithClock(clock))
		if err != nil {
			panic(err)
		}
		return db
	}

	db := open(1)
	if _, err := db.Lease(ctx, "nightly-job", "worker-1", time.Minute); err != nil {
		panic(err)
	}
	if _, err := db.Incr(ctx, "runs"); err != nil {
		panic(err)
	}

	disk.PowerLoss(faults.LossDrop)
	_ = db.Close() // the process died with the machine: this only frees memory
	disk.Reboot()
	clock.Advance(time.Second)

	db = open(2)
	defer db.Close()
	_, err := db.Lease(ctx, "nightly-job", "worker-2", time.Minute)
	var held *state.LeaseHeldError
	fmt.Println("lease still held by worker-1:", errors.As(err, &held) && held.Owner == "worker-1")
	_, err = db.Get(ctx, "runs")
	fmt.Println("runs lost:", errors.Is(err, state.ErrNotFound))
	// Output:
	// lease still held by worker-1: true
	// runs lost: true
}
