package main

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/statekit/statekit/state"
)

// parallel runs op from g goroutines until the budget is spent (a count
// budget is shared out among them) and times every call.
func parallel(b budget, g int, op func() error) (sample, error) {
	return spread(b, g, func(per budget) (sample, error) { return loop(per, op) }, nil)
}

// spread runs run from g goroutines, each with its share of the budget, then
// finish (if not nil) inside the time measured, and merges their samples.
func spread(b budget, g int, run func(per budget) (sample, error), finish func() error) (sample, error) {
	per := b
	if b.n > 0 {
		per.n = max(1, b.n/int64(g))
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		all  sample
		errs []error
	)
	start := time.Now()
	for range g {
		wg.Go(func() {
			s, err := run(per)
			mu.Lock()
			defer mu.Unlock()
			all.merge(s)
			errs = append(errs, err)
		})
	}
	wg.Wait()
	if finish != nil {
		errs = append(errs, finish())
	}
	all.elapsed = time.Since(start)
	return all, errors.Join(errs...)
}

// runHotKey runs Incr on one key from many goroutines against one goroutine,
// for statekit and, for comparison, for the naive pool.
func runHotKey(e *env) ([]Result, error) {
	db, n, closeAll, err := pair(e, "hot")
	if err != nil {
		return nil, err
	}
	defer closeAll()
	g := e.goroutines
	skIncr := func() error { _, err := db.Incr(e.ctx, "hot"); return err }
	nvIncr := func() error { _, err := n.doIncr(e.ctx, "hot"); return err }
	many, one, err := interleave(e,
		func(b budget) (sample, error) { return parallel(b, g, skIncr) },
		func(b budget) (sample, error) { return loop(b, skIncr) })
	if err != nil {
		return nil, err
	}
	nMany, nOne, err := interleave(e,
		func(b budget) (sample, error) { return parallel(b, g, nvIncr) },
		func(b budget) (sample, error) { return loop(b, nvIncr) })
	if err != nil {
		return nil, err
	}
	sk := ratioResult("hot-key", many.measure(fmt.Sprintf("Incr x%d goroutines", g)), one.measure("Incr x1"), 1.0)
	nv := ratioResult("hot-key", nMany.measure(fmt.Sprintf("naive x%d goroutines", g)), nOne.measure("naive x1"), 0)
	nv.Target = ""
	nv.Notes = []string{"the naive row is for comparison only: a database/sql pool whose connections contend in SQLite's busy handler"}
	return []Result{sk, nv}, nil
}

// sampleEvery is how often the buffered scenario times an operation:
// IncrBuffered takes about as long as reading the clock.
const sampleEvery = 64

// sampledLoop is loop, timing one operation in sampleEvery.
func sampledLoop(b budget, op func() error) (sample, error) {
	var s sample
	done := b.until()
	start := time.Now()
	for {
		timed := s.ops%sampleEvery == 0
		var t time.Time
		if timed {
			t = time.Now()
		}
		if err := op(); err != nil {
			return s, err
		}
		if timed {
			s.lat = append(s.lat, time.Since(t))
		}
		s.ops++
		if done(s.ops) {
			break
		}
	}
	s.elapsed = time.Since(start)
	return s, nil
}

// runBuffered runs IncrBuffered from many goroutines against exact Incr from
// as many, and checks that every buffered increment reached the file.
func runBuffered(e *env) ([]Result, error) {
	db, err := state.Open(e.path("buffered.state"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	g := e.goroutines
	round := 0
	var counted, lost int64
	buffered := func(b budget) (sample, error) {
		round++
		key := fmt.Sprintf("buffered:%d", round)
		all, err := spread(b, g, func(per budget) (sample, error) {
			return sampledLoop(per, func() error { return db.IncrBuffered(key, 1) })
		}, func() error { return db.Flush(e.ctx) }) // the time to reach the file counts
		if err != nil {
			return all, err
		}
		v, err := db.Get(e.ctx, key)
		if err != nil {
			return all, err
		}
		got, _ := v.Int()
		counted += got
		lost += all.ops - got
		return all, nil
	}
	exact := func(b budget) (sample, error) {
		return parallel(b, g, func() error { _, err := db.Incr(e.ctx, "exact"); return err })
	}
	bs, xs, err := interleave(e, buffered, exact)
	if err != nil {
		return nil, err
	}
	r := ratioResult("incr-buffered", bs.measure(fmt.Sprintf("IncrBuffered x%d", g)), xs.measure(fmt.Sprintf("Incr x%d", g)), 20)
	if lost != 0 {
		return nil, fmt.Errorf("not exact: %d buffered increments missing after Flush", lost)
	}
	r.Notes = append(r.Notes, fmt.Sprintf("exact after Flush: all %d buffered increments counted (latency sampled 1 in %d; the final Flush is inside the timed run)", counted, sampleEvery))
	return []Result{r}, nil
}
