package state_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
)

// exampleDB opens a fresh file in a temporary directory, with a fixed clock
// so the output is the same on every run.
func exampleDB() (*state.DB, *faults.Clock, func()) {
	dir, err := os.MkdirTemp("", "statekit-example-")
	if err != nil {
		log.Fatal(err)
	}
	clock := newClock()
	db, err := state.Open(filepath.Join(dir, "app.state"), state.WithClock(clock))
	if err != nil {
		log.Fatal(err)
	}
	return db, clock, func() { db.Close(); os.RemoveAll(dir) }
}

func Example() {
	db, _, done := exampleDB()
	defer done()
	ctx := context.Background()

	_ = db.Set(ctx, "greeting", "hello")
	v, _ := db.Get(ctx, "greeting")
	fmt.Println(v)
	n, _ := db.Incr(ctx, "visits")
	fmt.Println(n)
	// Output:
	// hello
	// 1
}

func ExampleDB_Incr() {
	db, clock, done := exampleDB()
	defer done()
	ctx := context.Background()

	// A rate limit: the TTL applies when Incr creates the counter.
	for i := 0; i < 3; i++ {
		n, _ := db.Incr(ctx, "rate:alice", state.TTL(time.Minute))
		fmt.Println("requests this minute:", n)
	}
	clock.Advance(time.Minute)
	n, _ := db.Incr(ctx, "rate:alice", state.TTL(time.Minute))
	fmt.Println("after the window:", n)

	_ = db.Set(ctx, "name", "bob")
	_, err := db.Incr(ctx, "name")
	fmt.Println(errors.Is(err, state.ErrNotInteger))
	// Output:
	// requests this minute: 1
	// requests this minute: 2
	// requests this minute: 3
	// after the window: 1
	// true
}

func ExampleDB_CAS() {
	db, _, done := exampleDB()
	defer done()
	ctx := context.Background()

	created, _ := db.CAS(ctx, "config", nil, "rev1") // nil: only if absent
	swapped, _ := db.CAS(ctx, "config", "rev1", "rev2")
	stale, _ := db.CAS(ctx, "config", "rev1", "rev3")
	v, _ := db.Get(ctx, "config")
	fmt.Println(created, swapped, stale, v)
	// Output: true true false rev2
}

func ExampleDB_Lease() {
	db, clock, done := exampleDB()
	defer done()
	ctx := context.Background()

	a, _ := db.Lease(ctx, "nightly", "worker-a", 30*time.Second)
	fmt.Println("worker-a token", a.Token)

	_, err := db.Lease(ctx, "nightly", "worker-b", 30*time.Second)
	var held *state.LeaseHeldError
	if errors.As(err, &held) {
		fmt.Printf("worker-b: held by %s for %v\n", held.Owner, held.Left)
	}

	clock.Advance(30 * time.Second) // worker-a paused past its lease
	b, _ := db.Lease(ctx, "nightly", "worker-b", 30*time.Second)
	fmt.Println("worker-b token", b.Token)
	err = db.Renew(ctx, a, 30*time.Second)
	fmt.Println("worker-a renew lost:", errors.Is(err, state.ErrLeaseLost))
	// Errors name the file first, then the verb and its key or lease.
	fmt.Println(strings.TrimPrefix(err.Error(), db.Path()+": "))
	// Output:
	// worker-a token 1
	// worker-b: held by worker-a for 30s
	// worker-b token 2
	// worker-a renew lost: true
	// renew "nightly" token 1: statekit: lease lost
}

func ExampleDB_Update() {
	db, _, done := exampleDB()
	defer done()
	ctx := context.Background()

	_ = db.Set(ctx, "balance:a", 100)
	err := db.Update(ctx, func(tx *state.Tx) error {
		if _, err := tx.IncrBy("balance:a", -30); err != nil {
			return err
		}
		_, err := tx.IncrBy("balance:b", 30)
		return err
	})
	a, _ := db.Get(ctx, "balance:a")
	b, _ := db.Get(ctx, "balance:b")
	fmt.Println(err, a, b)
	// Output: <nil> 70 30
}

func ExampleDB_TTL() {
	db, clock, done := exampleDB()
	defer done()
	ctx := context.Background()

	_ = db.Set(ctx, "session", "token", state.TTL(10*time.Second))
	clock.Advance(4 * time.Second)
	left, _ := db.TTL(ctx, "session")
	fmt.Println(left)
	_ = db.Set(ctx, "forever", 1)
	left, _ = db.TTL(ctx, "forever")
	fmt.Println(left == state.NoExpiry)
	clock.Advance(6 * time.Second)
	_, err := db.Get(ctx, "session")
	fmt.Println(errors.Is(err, state.ErrNotFound), strings.TrimPrefix(err.Error(), db.Path()+": "))
	// Output:
	// 6s
	// true
	// true get "session": statekit: key not found
}

func ExampleDB_IncrBuffered() {
	db, _, done := exampleDB()
	defer done()
	ctx := context.Background()

	for i := 0; i < 1000; i++ {
		_ = db.IncrBuffered("pageviews", 1) // in memory: no disk write each time
	}
	_ = db.Flush(ctx) // one transaction; Close and a background tick also flush
	v, _ := db.Get(ctx, "pageviews")
	fmt.Println(v)
	// Output: 1000
}
