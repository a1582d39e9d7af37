package ratelimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/ratelimit"
	"github.com/statekit/statekit/state"
)

// exampleDB opens a fresh file in a temporary directory on a clock the
// example steps by hand, so the output is the same on every run. An app
// opens its file with state.Open(path) and the real clock.
func exampleDB() (*state.DB, *faults.Clock, func()) {
	dir, err := os.MkdirTemp("", "ratelimit-example-")
	if err != nil {
		log.Fatal(err)
	}
	clock := faults.NewClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	db, err := state.Open(filepath.Join(dir, "app.state"), state.WithClock(clock))
	if err != nil {
		log.Fatal(err)
	}
	return db, clock, func() { db.Close(); os.RemoveAll(dir) }
}

func ExampleFixedWindow() {
	db, clock, done := exampleDB()
	defer done()
	ctx := context.Background()

	// 3 requests per client per minute, counted in the file: every process
	// that opens it shares the count.
	limiter, err := ratelimit.NewFixedWindow(db, 3, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	clock.Advance(15 * time.Second)
	for range 4 {
		d, _ := limiter.Allow(ctx, "client-42")
		fmt.Printf("allowed=%v remaining=%d retry-after=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	clock.Advance(45 * time.Second) // the next minute
	d, _ := limiter.Allow(ctx, "client-42")
	fmt.Println("next window:", d.Allowed)
	// Output:
	// allowed=true remaining=2 retry-after=0s
	// allowed=true remaining=1 retry-after=0s
	// allowed=true remaining=0 retry-after=45s
	// allowed=false remaining=0 retry-after=45s
	// next window: true
}

func ExampleSlidingWindow() {
	db, clock, done := exampleDB()
	defer done()
	ctx := context.Background()

	limiter, err := ratelimit.NewSlidingWindow(db, 10, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	d, _ := limiter.AllowN(ctx, "client-42", 10) // the whole minute's quota at once
	fmt.Println("10 at 9:00:00:", d.Allowed)

	// At 9:01:15 the sliding minute still covers 45s of the last one: its
	// 10 requests weigh 10*45/60 = 7.5, leaving room for 2.
	clock.Advance(75 * time.Second)
	d, _ = limiter.AllowN(ctx, "client-42", 3)
	fmt.Printf("3 at 9:01:15: %v, %d fit, retry after %v\n", d.Allowed, d.Remaining, d.RetryAfter)
	d, _ = limiter.AllowN(ctx, "client-42", 2)
	fmt.Println("2 at 9:01:15:", d.Allowed)
	// Output:
	// 10 at 9:00:00: true
	// 3 at 9:01:15: false, 2 fit, retry after 3s
	// 2 at 9:01:15: true
}

func ExampleTokenBucket() {
	db, clock, done := exampleDB()
	defer done()
	ctx := context.Background()

	// A token a second, bursts of up to 5.
	limiter, err := ratelimit.NewTokenBucket(db, 60, time.Minute, ratelimit.WithBurst(5))
	if err != nil {
		log.Fatal(err)
	}
	allowed := 0
	for range 8 {
		if d, _ := limiter.Allow(ctx, "client-42"); d.Allowed {
			allowed++
		}
	}
	fmt.Println("burst:", allowed, "of 8")
	d, _ := limiter.Allow(ctx, "client-42")
	fmt.Println("retry after:", d.RetryAfter, "full again in:", d.Reset)

	clock.Advance(2 * time.Second)
	d, _ = limiter.AllowN(ctx, "client-42", 2)
	fmt.Println("2 after 2s:", d.Allowed)
	// Output:
	// burst: 5 of 8
	// retry after: 1s full again in: 5s
	// 2 after 2s: true
}

func ExampleNewMiddleware() {
	db, _, done := exampleDB()
	defer done()

	limiter, err := ratelimit.NewFixedWindow(db, 2, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	byAPIKey := func(r *http.Request) string { return r.Header.Get("X-API-Key") }
	h, err := ratelimit.NewMiddleware(limiter, byAPIKey, api)
	if err != nil {
		log.Fatal(err)
	}

	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-API-Key", "k-42")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		hd := rec.Header()
		fmt.Printf("%d limit=%s remaining=%s reset=%s retry-after=%q\n", rec.Code, hd.Get("RateLimit-Limit"),
			hd.Get("RateLimit-Remaining"), hd.Get("RateLimit-Reset"), hd.Get("Retry-After"))
	}
	// Output:
	// 200 limit=2 remaining=1 reset=60 retry-after=""
	// 200 limit=2 remaining=0 reset=60 retry-after=""
	// 429 limit=2 remaining=0 reset=60 retry-after="60"
}
