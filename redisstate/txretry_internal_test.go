package redisstate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
)

// TestUpdateRetriesForTimeWithoutPause: an attempt that starts over because
// no single server time explains its answers (tx.Now read, then a key
// found absent a millisecond later: it may have expired in between) had no
// other writer to wait for, and its retry reads its keys first
// (txprefetch.go), so Update runs it again at once. Such a callback is a
// rate limiter's (tx.Now, then its window's key): pausing 1-2 ms before
// each such retry made Update three times slower with tx.Now first than
// after a read. A retry after a conflict with another writer still pauses.
func TestUpdateRetriesForTimeWithoutPause(t *testing.T) {
	s, srv := openStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var pauses []time.Duration
	s.pause = func(_ context.Context, d time.Duration) error { pauses = append(pauses, d); return nil }

	runs := 0
	err := s.Update(ctx, func(x any) error {
		tx := x.(*tx)
		runs++
		now, err := tx.Now()
		if err != nil {
			return err
		}
		for runs == 1 { // the server's clock moves past now (to a count of polls, not a time)
			tm, err := s.single.Time(ctx).Result()
			if err != nil {
				return err
			}
			if tm.UnixMilli() > now {
				break
			}
		}
		if _, err := tx.Get("absent"); !errors.Is(err, state.ErrNotFound) {
			return err // the first run's: start over
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if runs != 2 {
		t.Fatalf("%d runs, want 2: the first, pinned by Now, starts over", runs)
	}
	if len(pauses) != 0 {
		t.Fatalf("paused %v before a retry for time: no other writer to wait for", pauses)
	}

	runs = 0
	err = s.Update(ctx, func(x any) error {
		tx := x.(*tx)
		runs++
		if _, err := tx.Get("hot"); err != nil && !errors.Is(err, state.ErrNotFound) {
			return err
		}
		if runs == 1 {
			if _, err := srv.Command("SET", "t:k:hot", "i:1"); err != nil { // another writer
				return err
			}
		}
		return tx.Set("hot", state.IntValue(2), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if runs != 2 || len(pauses) != 1 {
		t.Fatalf("%d runs, pauses %v: a conflict is run again after one pause", runs, pauses)
	}
}

// TestUpdateGivingUpSaysWhy: Update's ErrBusy after its last attempt says
// why the attempts started over: other writers, keys expiring as they
// were read (answers at no single server time), or both, with counts.
func TestUpdateGivingUpSaysWhy(t *testing.T) {
	for _, c := range []struct {
		forTime int
		want    string
	}{
		{0, "32 attempts conflicted with other writers"},
		{txAttempts, "32 attempts read keys whose answers held at no single server time"},
		{5, "of 32 attempts, 27 conflicted with other writers and 5 read keys whose answers held at no single server time"},
	} {
		err := txGaveUp(c.forTime)
		if !errors.Is(err, state.ErrBusy) {
			t.Fatalf("%d for time: %v is not ErrBusy", c.forTime, err)
		}
		if got := err.Error(); !strings.Contains(got, c.want) {
			t.Errorf("%d for time: %q does not say %q", c.forTime, got, c.want)
		}
	}
}
