// Command quickstart shows statekit's verbs on a real file: a rate-limit
// counter with a TTL, a config value swapped with CAS, a lease with its
// fencing token, and a transaction.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/statekit/statekit/state"
)

func main() {
	dir, err := os.MkdirTemp("", "statekit-demo-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.state")
	if err := run(path); err != nil {
		log.Fatal(err)
	}
}

func run(path string) error {
	ctx := context.Background()
	db, err := state.Open(path)
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Println("opened", path)

	// A rate limit: at most 3 requests per client per minute.
	for i := 1; i <= 4; i++ {
		n, err := db.Incr(ctx, "rate:client-42", state.TTL(time.Minute))
		if err != nil {
			return err
		}
		verdict := "allowed"
		if n > 3 {
			verdict = "refused"
		}
		fmt.Printf("request %d: count %d, %s\n", i, n, verdict)
	}
	left, err := db.TTL(ctx, "rate:client-42")
	if err != nil {
		return err
	}
	fmt.Printf("rate window resets in %v\n", left.Round(time.Second))

	// A config revision, changed only by whoever read the current one.
	if err := db.Set(ctx, "config", "v1"); err != nil {
		return err
	}
	swapped, err := db.CAS(ctx, "config", "v1", "v2")
	if err != nil {
		return err
	}
	stale, err := db.CAS(ctx, "config", "v1", "v3")
	if err != nil {
		return err
	}
	v, err := db.Get(ctx, "config")
	if err != nil {
		return err
	}
	fmt.Printf("cas v1->v2: %v, stale cas v1->v3: %v, config is %s\n", swapped, stale, v)

	// A lease: only one copy of the nightly job runs.
	l, err := db.Lease(ctx, "nightly-job", "worker-a", 30*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("worker-a holds %q with fencing token %d\n", l.Name, l.Token)
	_, err = db.Lease(ctx, "nightly-job", "worker-b", 30*time.Second)
	var held *state.LeaseHeldError
	if errors.As(err, &held) {
		fmt.Printf("worker-b refused: held by %s\n", held.Owner)
	}
	if err := db.Release(ctx, l); err != nil {
		return err
	}
	l2, err := db.Lease(ctx, "nightly-job", "worker-b", 30*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("after release, worker-b holds it with token %d\n", l2.Token)

	// A transaction: move 10 credits, all or nothing.
	if err := db.Set(ctx, "credits:a", 50); err != nil {
		return err
	}
	err = db.Update(ctx, func(tx *state.Tx) error {
		if _, err := tx.IncrBy("credits:a", -10); err != nil {
			return err
		}
		_, err := tx.IncrBy("credits:b", 10)
		return err
	})
	if err != nil {
		return err
	}
	a, _ := db.Get(ctx, "credits:a")
	b, _ := db.Get(ctx, "credits:b")
	fmt.Printf("credits: a=%s b=%s\n", a, b)
	return nil
}
