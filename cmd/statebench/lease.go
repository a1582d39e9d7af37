package main

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/state"
)

// leaseWarmOps is how many untimed operations each lease side runs first.
const leaseWarmOps = 5000

// runLease measures lease grants, each synced before it is answered,
// against the floor of any durable commit on this disk: appending a small
// record to a file and syncing it. The first line grants a new lease name
// each time; the second grants and releases one name, a second (NORMAL)
// commit per operation.
func runLease(e *env) ([]Result, error) {
	db, err := state.Open(e.path("lease.state"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	f, err := os.OpenFile(e.path("append.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	defer f.Close()
	record := make([]byte, 64)
	appendSync := func(b budget) (sample, error) {
		return loop(b, func() error {
			if _, err := f.Write(record); err != nil {
				return fmt.Errorf("append: %w", err)
			}
			return datasync(f)
		})
	}
	var names int64
	grant := func(b budget) (sample, error) {
		return loop(b, func() error {
			names++
			_, err := db.Lease(e.ctx, "lease:"+strconv.FormatInt(names, 10), "owner", time.Minute)
			return err
		})
	}
	grantRelease := func(b budget) (sample, error) {
		return loop(b, func() error {
			l, err := db.Lease(e.ctx, "lease", "owner", time.Minute)
			if err != nil {
				return err
			}
			return db.Release(e.ctx, l)
		})
	}
	// Warm up until the WAL has been checkpointed and restarted, so commits
	// overwrite it in place, as in any process that has run a while.
	steady := runOpts{warm: budget{n: leaseWarmOps}, slice: true}
	gs, fs, err := interleaveWith(e, grant, appendSync, steady)
	if err != nil {
		return nil, err
	}
	rs, fs2, err := interleaveWith(e, grantRelease, appendSync, steady)
	if err != nil {
		return nil, err
	}
	// Grant and release pairs from many goroutines, each on a name of its
	// own, against one goroutine: grants called at the same moment share
	// one FULL commit, and the releases beside them commit NORMAL first.
	g := e.goroutines
	pairs := func(goroutines int) func(budget) (sample, error) {
		return func(b budget) (sample, error) {
			var next atomic.Int64
			return spread(b, goroutines, func(per budget) (sample, error) {
				name := "pair:" + strconv.FormatInt(next.Add(1), 10)
				return loop(per, func() error {
					l, err := db.Lease(e.ctx, name, "owner", time.Minute)
					if err != nil {
						return err
					}
					return db.Release(e.ctx, l)
				})
			}, nil)
		}
	}
	many, one, err := interleaveWith(e, pairs(g), pairs(1), steady)
	if err != nil {
		return nil, err
	}
	baseline := "append+" + datasyncName
	gr := ratioResult("lease", gs.measure("Lease grant"), fs.measure(baseline), 0.8)
	gr.Notes = append(gr.Notes, fmt.Sprintf("Lease grant: a new lease name each time, each grant a commit synced before its answer, after %d untimed grants so the WAL has wrapped once (until it has, commits append to the WAL and cost about twice as much); the baseline appends 64 bytes and calls %s", leaseWarmOps, datasyncName))
	r := ratioResult("lease", rs.measure("Lease+Release"), fs2.measure(baseline), 0)
	r.Target = ""
	r.Notes = append(r.Notes, "Lease+Release: one name granted and released, a FULL and a NORMAL commit per operation; for comparison")
	p := ratioResult("lease", many.measure(fmt.Sprintf("Lease+Release x%d goroutines", g)), one.measure("Lease+Release x1"), 3)
	p.Notes = append(p.Notes, fmt.Sprintf("Lease+Release x%d goroutines: each goroutine grants and releases a name of its own; grants called at the same moment share one FULL commit, the releases queued with them commit NORMAL just before it", g))
	return []Result{gr, r, p}, nil
}
