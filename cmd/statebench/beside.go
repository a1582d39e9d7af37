package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/statekit/statekit/state"
)

// besideSweep is what alternateBeside measured.
type besideSweep struct {
	idle, busy sample        // the verb's calls alone, and beside the Sweep
	rows       int           // rows the Sweep deleted over all its slices
	sweepTime  time.Duration // the Sweep's time over all its slices
	slices     int           // pairs of slices
}

// alternateBeside runs verb alone for a slice, then beside db.Sweep for a
// slice (the Sweep cancelled at the slice's end and started again in the
// next), and so on until a Sweep ends by itself: nothing is left to sweep.
// Alternating keeps the two sides under the same load, as interleave does
// for a subject and its baseline; measuring idle first and beside after
// let the machine's load move the ratio (8.16x, 1.44x and 1.10x for near
// identical engines).
func alternateBeside(ctx context.Context, db *state.DB, verb func() error) (besideSweep, error) {
	type swept struct {
		n   int
		err error
	}
	var out besideSweep
	for {
		s, err := loop(budget{d: sliceTime}, verb)
		if err != nil {
			return out, err
		}
		out.idle.merge(s)
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan swept, 1)
		start := time.Now()
		go func() {
			n, err := db.Sweep(sctx)
			done <- swept{n: n, err: err}
		}()
		var res swept
		finished := false
		for end := start.Add(sliceTime); !finished && time.Now().Before(end); {
			t := time.Now()
			if err := verb(); err != nil {
				cancel()
				<-done
				return out, err
			}
			out.busy.lat = append(out.busy.lat, time.Since(t))
			out.busy.ops++
			select {
			case res = <-done:
				finished = true
			default:
			}
		}
		cancel()
		if !finished {
			res = <-done
		}
		elapsed := time.Since(start)
		out.busy.elapsed += elapsed
		out.sweepTime += elapsed
		out.rows += res.n
		out.slices++
		if res.err != nil && !errors.Is(res.err, context.Canceled) {
			return out, fmt.Errorf("sweep beside the verb: %w", res.err)
		}
		if res.err == nil {
			return out, nil // the sweep ended on its own: nothing left
		}
	}
}
