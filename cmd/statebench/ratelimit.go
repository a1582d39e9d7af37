package main

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/internal/naivelimit"
	"github.com/statekit/statekit/ratelimit"
	"github.com/statekit/statekit/state"
)

// Rate-limit decisions: each limiter of package ratelimit against the naive
// read-then-write limiter (Get the window's count, compare, Set count+1:
// internal/naivelimit), one goroutine and e.goroutines, on statekit files of
// their own. Decisions walk over rlClients keys with a limit no client
// reaches, so every decision is an allowed one, the path that writes. Then
// an exactness round on one key: e.goroutines goroutines fire rlExactFire
// requests at a limit of rlExactLimit, through the limiter and through the
// naive one, and the allowed counts go in the notes.
const (
	rlClients    = 1000
	rlExactLimit = 1000
	rlExactFire  = 4000
)

// rlKinds are the limiters measured, in report order.
var rlKinds = []struct {
	scenario, name string
	make           func(db *state.DB, limit int64, window time.Duration) (ratelimit.Limiter, error)
}{
	{"ratelimit-fixed", "FixedWindow", func(db *state.DB, l int64, w time.Duration) (ratelimit.Limiter, error) {
		return ratelimit.NewFixedWindow(db, l, w)
	}},
	{"ratelimit-sliding", "SlidingWindow", func(db *state.DB, l int64, w time.Duration) (ratelimit.Limiter, error) {
		return ratelimit.NewSlidingWindow(db, l, w)
	}},
	{"ratelimit-bucket", "TokenBucket", func(db *state.DB, l int64, w time.Duration) (ratelimit.Limiter, error) {
		return ratelimit.NewTokenBucket(db, l, w)
	}},
}

// runRateLimit measures every limiter against the naive one.
func runRateLimit(e *env) ([]Result, error) {
	var out []Result
	for _, k := range rlKinds {
		res, err := runRateLimitKind(e, k.scenario, k.name, k.make)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.scenario, err)
		}
		out = append(out, res...)
	}
	return out, nil
}

func runRateLimitKind(e *env, scenario, name string,
	mk func(*state.DB, int64, time.Duration) (ratelimit.Limiter, error)) ([]Result, error) {
	skDB, err := state.Open(e.path(scenario + ".state"))
	if err != nil {
		return nil, err
	}
	defer skDB.Close()
	nvDB, err := state.Open(e.path(scenario + ".naive.state"))
	if err != nil {
		return nil, err
	}
	defer nvDB.Close()
	const never = 1 << 40 // a limit no client reaches in a run
	sk, err := mk(skDB, never, time.Hour)
	if err != nil {
		return nil, err
	}
	nv := naivelimit.New(nvDB, never, time.Hour)

	// decide returns an op that decides the next client's request on l
	// and fails if it is refused.
	decide := func(l ratelimit.Limiter) func() error {
		var i atomic.Int64
		return func() error {
			key := "client:" + strconv.FormatInt(i.Add(1)%rlClients, 10)
			d, err := l.Allow(e.ctx, key)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("%q refused under a limit of %d", key, int64(never))
			}
			return err
		}
	}
	skOp, nvOp := decide(sk), decide(nv)
	s1, n1, err := interleave(e,
		func(b budget) (sample, error) { return loop(b, skOp) },
		func(b budget) (sample, error) { return loop(b, nvOp) })
	if err != nil {
		return nil, err
	}
	g := e.goroutines
	sg, ng, err := interleave(e,
		func(b budget) (sample, error) { return parallel(b, g, skOp) },
		func(b budget) (sample, error) { return parallel(b, g, nvOp) })
	if err != nil {
		return nil, err
	}
	one := ratioResult(scenario, s1.measure(name+".Allow x1"), n1.measure("naive Get+Set x1"), 0)
	many := ratioResult(scenario, sg.measure(fmt.Sprintf("%s.Allow x%d", name, g)), ng.measure(fmt.Sprintf("naive Get+Set x%d", g)), 0)
	one.Target, many.Target = "", ""

	// Exactness on one key, each side on a key of its own in its file.
	skX, err := mk(skDB, rlExactLimit, time.Hour)
	if err != nil {
		return nil, err
	}
	nvX := naivelimit.New(nvDB, rlExactLimit, time.Hour)
	skAllowed, err := fireAt(e, skX, "exact", g, rlExactFire)
	if err != nil {
		return nil, err
	}
	nvAllowed, err := fireAt(e, nvX, "exact", g, rlExactFire)
	if err != nil {
		return nil, err
	}
	if skAllowed != rlExactLimit {
		return nil, fmt.Errorf("not exact: %s allowed %d of %d requests at a limit of %d", name, skAllowed, rlExactFire, rlExactLimit)
	}
	many.Notes = append(many.Notes, fmt.Sprintf(
		"allowed decisions over %d client keys, an hour's window, a limit no client reaches. One key, %d goroutines firing %d requests at a limit of %d: %s allowed %d, the naive Get+Set allowed %d",
		rlClients, g, rlExactFire, rlExactLimit, name, skAllowed, nvAllowed))
	return []Result{one, many}, nil
}

// fireAt fires n requests at key through l from g goroutines and returns how
// many were allowed.
func fireAt(e *env, l ratelimit.Limiter, key string, g, n int) (int64, error) {
	var allowed, left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	errs := make([]error, g)
	for i := range g {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				d, err := l.Allow(e.ctx, key)
				if err != nil {
					errs[i] = err
					return
				}
				if d.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return allowed.Load(), nil
}
