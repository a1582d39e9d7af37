package redisstate

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/statekit/statekit/internal/backend"
	"github.com/statekit/statekit/state"
)

func backendOptions() backend.Options {
	return backend.Options{BusyTimeout: state.DefaultBusyTimeout}
}

func TestStoreIncrOverflowEdges(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	cases := []struct {
		start, delta int64
		want         int64
		err          error
	}{
		{math.MaxInt64 - 1, 1, math.MaxInt64, nil},
		{math.MaxInt64, 1, 0, state.ErrOverflow},
		{math.MaxInt64, math.MaxInt64, 0, state.ErrOverflow},
		{math.MaxInt64, math.MinInt64, -1, nil},
		{math.MinInt64 + 1, -1, math.MinInt64, nil},
		{math.MinInt64, -1, 0, state.ErrOverflow},
		{math.MinInt64, math.MinInt64, 0, state.ErrOverflow},
		{math.MinInt64, math.MaxInt64, -1, nil},
		{-5, 5, 0, nil},
		{-1000000000, 1, -999999999, nil},
		{999999999, 1, 1000000000, nil},
		{-1, -999999999, -1000000000, nil},
		{1234567890123456789, -1234567890123456790, -1, nil},
		{0, math.MinInt64, math.MinInt64, nil},
	}
	for _, c := range cases {
		if err := s.Set(ctx, "n", state.IntValue(c.start), 0); err != nil {
			t.Fatal(err)
		}
		got, err := s.IncrBy(ctx, "n", c.delta, 0)
		if !errors.Is(err, c.err) || err == nil && got != c.want {
			t.Errorf("%d + %d = %d, %v; want %d, %v", c.start, c.delta, got, err, c.want, c.err)
		}
		v, _ := s.Get(ctx, "n")
		want := c.want
		if c.err != nil {
			want = c.start
		}
		if n, ok := v.Int(); !ok || n != want {
			t.Errorf("after %d + %d stored %v, want %d", c.start, c.delta, v, want)
		}
	}
	// absent key starts from delta
	if n, err := s.IncrBy(ctx, "fresh", math.MinInt64, 0); err != nil || n != math.MinInt64 {
		t.Fatalf("fresh: %d %v", n, err)
	}
}
