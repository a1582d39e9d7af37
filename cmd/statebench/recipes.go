package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/cache"
	"github.com/statekit/statekit/state"
)

// The other recipes beside their naive versions, interleaved on files of
// their own as the limiters are (ratelimit.go):
//
//   - idempotency claims: CAS(key, nil, v, TTL) (SET NX PX) against Get,
//     then Set if absent; every claim is on a fresh key, so every one wins
//     (the path that writes). Then 8 goroutines (-goroutines) claim each of
//     recipeClaimKeys keys: the claims won go in the notes (exactly one per
//     key, or the run fails; the naive version's double claims).
//   - the read-through cache: cache.GetOrCompute against Get, on a miss
//     compute and Set, on hits (recipeCacheKeys keys filled first) and on
//     misses (a fresh key each call; fn returns at once). Then the
//     goroutines miss recipeColdKeys cold keys together, fn taking
//     recipeFnTime: how many times fn ran goes in the notes (once per key,
//     or the run fails; the naive version's).
const (
	recipeClaimKeys = 500
	recipeCacheKeys = 1000
	recipeColdKeys  = 50
	recipeFnTime    = 2 * time.Millisecond
	recipeTTL       = time.Hour
)

// runRecipes measures idempotency claims and the cache against their naive
// versions.
func runRecipes(e *env) ([]Result, error) {
	claims, err := runClaims(e)
	if err != nil {
		return nil, fmt.Errorf("recipe-claim: %w", err)
	}
	fills, err := runCacheBench(e)
	if err != nil {
		return nil, fmt.Errorf("recipe-cache: %w", err)
	}
	return append(claims, fills...), nil
}

// claimCAS claims key on db with SET NX PX and reports whether it won.
func claimCAS(ctx context.Context, db *state.DB, key, me string) (bool, error) {
	return db.CAS(ctx, key, nil, me, state.TTL(recipeTTL))
}

// claimNaive claims key on db with Get, then Set if absent.
func claimNaive(ctx context.Context, db *state.DB, key, me string) (bool, error) {
	_, err := db.Get(ctx, key)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, state.ErrNotFound):
		return false, err
	}
	return true, db.Set(ctx, key, me, state.TTL(recipeTTL))
}

func runClaims(e *env) ([]Result, error) {
	const scenario = "recipe-claim"
	skDB, nvDB, err := openPair(e, scenario)
	if err != nil {
		return nil, err
	}
	defer skDB.Close()
	defer nvDB.Close()
	claim := func(db *state.DB, f func(context.Context, *state.DB, string, string) (bool, error)) func() error {
		var i atomic.Int64
		return func() error {
			n := strconv.FormatInt(i.Add(1), 10)
			ok, err := f(e.ctx, db, "idem:fresh:"+n, n)
			if err == nil && !ok {
				err = fmt.Errorf("fresh key %s already claimed", n)
			}
			return err
		}
	}
	skOp, nvOp := claim(skDB, claimCAS), claim(nvDB, claimNaive)
	g := e.goroutines
	one, many, err := pairRows(e, scenario, skOp, nvOp, "CAS NX claim", "naive Get+Set claim")
	if err != nil {
		return nil, err
	}
	skWon, err := claimAll(e, skDB, claimCAS, g)
	if err != nil {
		return nil, err
	}
	nvWon, err := claimAll(e, nvDB, claimNaive, g)
	if err != nil {
		return nil, err
	}
	if skWon != recipeClaimKeys {
		return nil, fmt.Errorf("not exact: CAS NX won %d claims on %d keys", skWon, recipeClaimKeys)
	}
	many.Notes = append(many.Notes, fmt.Sprintf(
		"each claim on a fresh key (it wins). %d goroutines each claiming the same %d keys: CAS NX won %d (one per key), the naive Get+Set %d (%d keys claimed twice or more)",
		g, recipeClaimKeys, skWon, nvWon, nvWon-recipeClaimKeys))
	return []Result{one, many}, nil
}

// claimAll has g goroutines each claim every one of recipeClaimKeys keys
// with f, and returns how many claims won.
func claimAll(e *env, db *state.DB, f func(context.Context, *state.DB, string, string) (bool, error), g int) (int64, error) {
	var won atomic.Int64
	errs := make([]error, g)
	var wg sync.WaitGroup
	for gi := range g {
		wg.Go(func() {
			for k := range recipeClaimKeys {
				ok, err := f(e.ctx, db, "idem:shared:"+strconv.Itoa(k), strconv.Itoa(gi))
				if err != nil {
					errs[gi] = err
					return
				}
				if ok {
					won.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return won.Load(), errors.Join(errs...)
}

// naiveGetOrCompute is the read-through a developer writes first: Get, and
// on a miss compute and Set. Nothing stops several callers computing at once.
func naiveGetOrCompute(ctx context.Context, db *state.DB, key string, ttl time.Duration,
	fn func(context.Context) ([]byte, error)) ([]byte, error) {
	v, err := db.Get(ctx, key)
	if err == nil {
		return v.Bytes(), nil
	}
	if !errors.Is(err, state.ErrNotFound) {
		return nil, err
	}
	b, err := fn(ctx)
	if err != nil {
		return nil, err
	}
	return b, db.Set(ctx, key, b, state.TTL(ttl))
}

type getOrCompute func(ctx context.Context, db *state.DB, key string, ttl time.Duration,
	fn func(context.Context) ([]byte, error)) ([]byte, error)

func statekitGetOrCompute(ctx context.Context, db *state.DB, key string, ttl time.Duration,
	fn func(context.Context) ([]byte, error)) ([]byte, error) {
	return cache.GetOrCompute(ctx, db, key, ttl, fn)
}

func runCacheBench(e *env) ([]Result, error) {
	const scenario = "recipe-cache"
	skDB, nvDB, err := openPair(e, scenario)
	if err != nil {
		return nil, err
	}
	defer skDB.Close()
	defer nvDB.Close()
	value := []byte("a cached report of a few dozen bytes, say")
	instant := func(context.Context) ([]byte, error) { return value, nil }
	for i := range recipeCacheKeys {
		for _, db := range []*state.DB{skDB, nvDB} {
			if err := db.Set(e.ctx, "hot:"+strconv.Itoa(i), value, state.TTL(recipeTTL)); err != nil {
				return nil, err
			}
		}
	}
	hit := func(db *state.DB, f getOrCompute) func() error {
		var i atomic.Int64
		return func() error {
			key := "hot:" + strconv.FormatInt(i.Add(1)%recipeCacheKeys, 10)
			_, err := f(e.ctx, db, key, recipeTTL, func(context.Context) ([]byte, error) {
				return nil, fmt.Errorf("%q missed", key)
			})
			return err
		}
	}
	miss := func(db *state.DB, f getOrCompute) func() error {
		var i atomic.Int64
		return func() error {
			_, err := f(e.ctx, db, "cold:"+strconv.FormatInt(i.Add(1), 10), recipeTTL, instant)
			return err
		}
	}
	hit1, hitG, err := pairRows(e, scenario+"-hit", hit(skDB, statekitGetOrCompute), hit(nvDB, naiveGetOrCompute),
		"GetOrCompute hit", "naive Get hit")
	if err != nil {
		return nil, err
	}
	miss1, missG, err := pairRows(e, scenario+"-miss", miss(skDB, statekitGetOrCompute), miss(nvDB, naiveGetOrCompute),
		"GetOrCompute miss", "naive Get+compute+Set miss")
	if err != nil {
		return nil, err
	}
	g := e.goroutines
	skRuns, err := missTogether(e, skDB, statekitGetOrCompute, g)
	if err != nil {
		return nil, err
	}
	nvRuns, err := missTogether(e, nvDB, naiveGetOrCompute, g)
	if err != nil {
		return nil, err
	}
	if skRuns != recipeColdKeys {
		return nil, fmt.Errorf("not once: fn ran %d times for %d keys", skRuns, recipeColdKeys)
	}
	missG.Notes = append(missG.Notes, fmt.Sprintf(
		"%d goroutines missing each of %d cold keys together, fn taking %v: fn ran %d times through GetOrCompute (once per key), %d through the naive version",
		g, recipeColdKeys, recipeFnTime, skRuns, nvRuns))
	return []Result{hit1, hitG, miss1, missG}, nil
}

// missTogether has g goroutines read each of recipeColdKeys cold keys
// through f, all of them a key at a time (they meet at a barrier per key),
// fn taking recipeFnTime, and returns how many times fn ran.
func missTogether(e *env, db *state.DB, f getOrCompute, g int) (int64, error) {
	var runs atomic.Int64
	fn := func(context.Context) ([]byte, error) {
		runs.Add(1)
		time.Sleep(recipeFnTime)
		return []byte("computed"), nil
	}
	errs := make([]error, g)
	for k := range recipeColdKeys {
		key := "together:" + strconv.Itoa(k)
		var start sync.WaitGroup
		start.Add(1)
		var wg sync.WaitGroup
		for gi := range g {
			wg.Go(func() {
				start.Wait()
				if _, err := f(e.ctx, db, key, recipeTTL, fn); err != nil && errs[gi] == nil {
					errs[gi] = err
				}
			})
		}
		start.Done()
		wg.Wait()
	}
	return runs.Load(), errors.Join(errs...)
}

// openPair opens the statekit side's file and the naive side's.
func openPair(e *env, scenario string) (*state.DB, *state.DB, error) {
	sk, err := state.Open(e.path(scenario + ".state"))
	if err != nil {
		return nil, nil, err
	}
	nv, err := state.Open(e.path(scenario + ".naive.state"))
	if err != nil {
		sk.Close()
		return nil, nil, err
	}
	return sk, nv, nil
}

// pairRows interleaves skOp against nvOp with one goroutine and with
// e.goroutines, and returns the two rows.
func pairRows(e *env, scenario string, skOp, nvOp func() error, skName, nvName string) (Result, Result, error) {
	s1, n1, err := interleave(e,
		func(b budget) (sample, error) { return loop(b, skOp) },
		func(b budget) (sample, error) { return loop(b, nvOp) })
	if err != nil {
		return Result{}, Result{}, err
	}
	g := e.goroutines
	sg, ng, err := interleave(e,
		func(b budget) (sample, error) { return parallel(b, g, skOp) },
		func(b budget) (sample, error) { return parallel(b, g, nvOp) })
	if err != nil {
		return Result{}, Result{}, err
	}
	one := ratioResult(scenario, s1.measure(skName+" x1"), n1.measure(nvName+" x1"), 0)
	many := ratioResult(scenario, sg.measure(fmt.Sprintf("%s x%d", skName, g)), ng.measure(fmt.Sprintf("%s x%d", nvName, g)), 0)
	one.Target, many.Target = "", ""
	return one, many, nil
}
