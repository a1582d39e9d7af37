package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/statekit/statekit/state"
)

// runOpen opens a file holding many keys, against the naive baseline
// opening a database/sql pool and preparing its statements on a file as big.
func runOpen(e *env) ([]Result, error) {
	path, naivePath := e.path("open.state"), e.path("open.naive.db")
	db, err := state.Open(path)
	if err != nil {
		return nil, err
	}
	db.Close()
	n, err := openNaive(naivePath)
	if err != nil {
		return nil, err
	}
	n.close()
	e.logf("open: writing %d keys to each file", e.rows)
	if err := fill(path, e.rows, "key:", "0"); err != nil {
		return nil, err
	}
	if err := fill(naivePath, e.rows, "key:", "0"); err != nil {
		return nil, err
	}
	timedOpen := func(open func() (func() error, error)) func(budget) (sample, error) {
		return func(b budget) (sample, error) {
			var s sample
			done := b.until()
			for {
				t := time.Now()
				closeFn, err := open()
				d := time.Since(t)
				if err != nil {
					return s, err
				}
				s.lat = append(s.lat, d)
				s.elapsed += d
				s.ops++
				if err := closeFn(); err != nil {
					return s, err
				}
				if done(s.ops) {
					return s, nil
				}
			}
		}
	}
	sk, nv, err := interleave(e,
		timedOpen(func() (func() error, error) {
			db, err := state.Open(path)
			if err != nil {
				return nil, err
			}
			return db.Close, nil
		}),
		timedOpen(func() (func() error, error) {
			n, err := openNaive(naivePath)
			if err != nil {
				return nil, err
			}
			return n.close, nil
		}))
	if err != nil {
		return nil, err
	}
	keys := strconv.Itoa(e.rows)
	subject, baseline := sk.measure("Open, "+keys+" keys"), nv.measure("naive open+prepare")
	r := Result{Scenario: "open", Subject: subject, Baseline: baseline, Ratio: subject.P99Micros / 1e3,
		Unit: "ms p99", Target: "<= 20 ms", Met: subject.P99Micros <= 20e3}
	r.Notes = append(r.Notes, fmt.Sprintf("Open of a %s-key file: p50 %.2f ms, p99 %.2f ms, max %.2f ms; ops/s here is opens per second of time spent opening (Close not timed)",
		keys, subject.P50Micros/1e3, subject.P99Micros/1e3, subject.MaxMicros/1e3))
	return []Result{r}, nil
}
