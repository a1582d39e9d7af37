package cache_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/cache"
	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
)

func ExampleGetOrCompute() {
	dir, err := os.MkdirTemp("", "cache-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// A clock the example steps by hand; an app opens its file with
	// state.Open(path) and the real clock.
	clock := faults.NewClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	db, err := state.Open(filepath.Join(dir, "app.state"), state.WithClock(clock))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	var computed atomic.Int64
	report := func(context.Context) ([]byte, error) { // the slow query the cache saves
		n := computed.Add(1)
		return []byte(fmt.Sprintf("report #%d", n)), nil
	}

	// Ten callers at once, in goroutines here (or in processes sharing the
	// file): one computes, the others wait for its value.
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if _, err := cache.GetOrCompute(ctx, db, "report:daily", time.Minute, report); err != nil {
				log.Fatal(err)
			}
		})
	}
	wg.Wait()
	v, _ := cache.GetOrCompute(ctx, db, "report:daily", time.Minute, report)
	fmt.Printf("%s, computed %d time(s) for 11 callers\n", v, computed.Load())

	clock.Advance(time.Minute) // the value expires
	v, _ = cache.GetOrCompute(ctx, db, "report:daily", time.Minute, report)
	fmt.Printf("%s after a minute\n", v)
	// Output:
	// report #1, computed 1 time(s) for 11 callers
	// report #2 after a minute
}
